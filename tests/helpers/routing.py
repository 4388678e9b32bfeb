"""Werkzeug's URL builders compiled once per test process, not once per test.

Every test makes an app of its own (tests/conftest.py `app`), and each app's URL map compiles a
builder function for every rule: Werkzeug writes its Python source as an AST and compiles it,
about two thirds of what `create_app` costs. The function it compiles depends only on the rule's
text, its parts, its defaults and the kind of each converter (the rule itself is passed in as an
argument when a URL is built), so two apps' identical rules can share it."""

from __future__ import annotations

from typing import Any

from werkzeug.routing import Rule

_compile = Rule._compile_builder
_builders: dict[tuple[Any, ...], Any] = {}


def _key(rule: Rule, append_unknown: bool) -> tuple[Any, ...]:
    converters = tuple((name, type(c), c.regex) for name, c in sorted(rule._converters.items()))
    defaults = tuple(sorted((str(k), repr(v)) for k, v in (rule.defaults or {}).items()))
    return (rule.rule, rule.subdomain, rule.host, tuple(rule._trace), defaults, converters, append_unknown)


def _shared_builder(self: Rule, append_unknown: bool = True) -> Any:
    key = _key(self, append_unknown)
    builder = _builders.get(key)
    if builder is None:
        builder = _builders[key] = _compile(self, append_unknown)
    return builder


def share_builders() -> None:
    """From now on in this process, a rule whose builder was compiled before reuses it."""
    Rule._compile_builder = _shared_builder  # type: ignore[method-assign]
