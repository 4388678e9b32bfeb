"""flask actions: the actions with their kind, toolsets and schema; `actions check`: their contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from flask import current_app
from flask.cli import with_appcontext

from app.copilot import engine
from app.copilot.actions import secret_fields, tool_schema


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the schemas as JSON.")
@click.pass_context
@with_appcontext
def actions(context: click.Context, as_json: bool) -> None:
    """List the actions with kind, toolsets and schema (`actions check`: their contract)."""
    if context.invoked_subcommand is not None:
        return
    registry = engine().registry
    rows: list[dict[str, Any]] = [
        {
            "name": a.name,
            "kind": a.kind.value,
            "toolsets": list(a.toolsets),
            "schema": tool_schema(a.Input),
            "source": a.source,
            "asks_for_secret": sorted(secret_fields(a.Input)) if a.ask_for_missing else [],
            "countersign": _countersign_of(a),
            "editable": list(a.editable),
        }
        for a in registry.actions.values()
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in sorted(rows, key=lambda r: r["name"]):
        fields = ", ".join(f"{k}{'*' if k in row['schema'].get('required', []) else ''}" for k in row["schema"]["properties"])
        flag = f"  ! secret {', '.join(row['asks_for_secret'])}: a form will refuse it" if row["asks_for_secret"] else ""
        second = f"  countersigned by: {row['countersign']}" if row["countersign"] else ""
        click.echo(f"{row['name']:<16} {row['kind']:<12} {','.join(row['toolsets']) or '-':<8} ({fields}){flag}{second}")


def _countersign_of(action: Any) -> str:
    """Who must countersign the action's cards, as `flask actions` lists it ("" for nobody)."""
    rule = action.countersign
    if isinstance(rule, dict):
        return ", ".join(f"{operation}: {getattr(one, 'label', one)}" for operation, one in rule.items())
    return "" if rule is None else str(getattr(rule, "label", rule))


@actions.command("check")
@with_appcontext
def actions_check() -> None:
    """Check every DESTRUCTIVE/EXTERNAL action (and operation map): no handle() before a confirm,
    no model argument on its card, no confirm by another person, nothing run on decline."""
    import tempfile

    from app.copilot.kit import check_all, migrated_template, running

    package = current_app.config.get("ACTIONS_PACKAGE", "app.actions")
    registry = engine().registry
    names = sorted(a.name for a in registry.actions.values() if a.may_need_card())
    every_toolset = sorted({t for a in registry.actions.values() for t in a.toolsets})
    with tempfile.TemporaryDirectory() as workdir:
        factory = current_app.extensions["countersign.factory"]  # (the kit makes throwaway apps with it)
        template = migrated_template(Path(workdir, "template.sqlite3"), factory=factory, ACTIONS_PACKAGE=package)
        results = check_all(
            lambda: running(
                template,
                Path(workdir),
                freeze=False,
                factory=factory,
                ACTIONS_PACKAGE=package,
                COUNTERSIGN_TOOLSETS=every_toolset,
            ),
            names,
        )
    failed = False
    for name, problems in results.items():
        if problems:
            failed = True
            for problem in problems:
                click.echo(f"FAIL {problem}")
        else:
            click.echo(f"ok   {name}")
    if failed:
        raise SystemExit(1)
