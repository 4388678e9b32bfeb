"""The contract every risky action gets checked for (`flask --app wsgi actions check`, and the
kit's `actions_contract_test()`): its handle() does not run before a confirm, its card holds none
of the model's argument strings (but those it declares in `shows`; a template's placeholders are
filled from approval_values(), which must resolve them, not hand them back), another person cannot
confirm it, a card under the two-person rule waits after its person's confirm and cannot be
countersigned by them, and a declined card runs nothing."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.copilot.actions import Action, choices, placeholders
from app.copilot.kit._model import tool_call
from app.copilot.turns import parse_slash
from app.errors import CountersignError
from app.status import Status

MARK = "zq"  # string arguments get a marker appended, so an echo is found even for short words


def allowed_on_card(action: type[Action]) -> set[str]:
    """The fields whose values the card may show as given: those the action declares in `shows`,
    and template placeholders that are closed choices (the developer's words, not the model's)."""
    names = set(action.shows)
    for template in action.requires_approval.values():
        names.update(p for p in placeholders(template) if choices(action.Input, p) is not None)
    return names


def resolved(action: type[Action]) -> set[str]:
    """The template placeholders approval_values() must resolve."""
    return {p for t in action.requires_approval.values() for p in placeholders(t)} - allowed_on_card(action)


def values_echo(kit: Any, action: type[Action], marked: dict[str, Any]) -> list[str]:
    """approval_values() given the marked arguments must not hand them back (NotFound is fine: it
    looked the value up and found nothing)."""
    from app.copilot.turns import context_for

    with kit.app.app_context():
        try:
            input = action.Input.model_validate(marked)
            values = action().approval_values(context_for(kit._user(), "test"), input)
        except (CountersignError, ValidationError):
            return []
    return [
        f"{action.name}: approval_values() hands back the model's {key!r} ({value!r}) instead of resolving it"
        for key, value in marked.items()
        if key in resolved(action) and isinstance(value, str) and any(value in str(v) for v in values.values())
    ]


def sample(action: type[Action]) -> dict[str, Any] | None:
    """The arguments of the action's first slash-command example."""
    for example in action.examples:
        parsed = parse_slash(example)
        if parsed and parsed[0] == action.name:
            return parsed[1]
    return None


def countersigned_sample(action: type[Action]) -> dict[str, Any] | None:
    """The arguments of the action's first slash-command example whose card needs a countersignature."""
    for example in action.examples:
        parsed = parse_slash(example)
        if not parsed or parsed[0] != action.name:
            continue
        try:
            if action.countersigner(action.Input.model_validate(parsed[1])) is not None:
                return parsed[1]
        except ValidationError:
            continue
    return None


def check_action(kit: Any, name: str, person: str = "alice@example.com", other: str = "bob@example.com") -> list[str]:
    """Run one action's contract on a seeded app; return its problems (empty: it holds)."""
    from app.copilot.turns import engine

    problems = _check_first(kit, name, person, other)
    with kit.app.app_context():
        action = engine().registry.get(name)
    arguments = countersigned_sample(action) if action is not None else None
    if action is not None and arguments is not None and arguments != sample(action):
        problems += _check_countersigned(kit, action, arguments, person)
    return problems


def _check_countersigned(kit: Any, action: type[Action], arguments: dict[str, Any], person: str) -> list[str]:
    """The example that needs a countersignature: its person's confirm waits, they cannot countersign it."""

    kit.as_person(person)
    kit.model.enqueue(tool_call(action.name, **arguments))
    kit.chat(f"check {action.name} countersigned")
    try:
        card = kit.pending()
    except LookupError:
        return [f"{action.name}: no card was shown for {arguments!r} (does its example work on the seeded data for {person}?)"]
    problems = _countersigned(kit, action, card)
    card.decline()
    return problems


def _check_first(kit: Any, name: str, person: str, other: str) -> list[str]:
    """The contract on the action's first example."""
    from app.copilot.turns import engine

    with kit.app.app_context():
        action = engine().registry.get(name)
        if action is None:
            return [f"{name}: no such action"]
        kit.as_person(person)
        arguments = sample(action)
        if arguments is None:
            return [
                f"{name}: cannot be checked: add an example like '/{name} field=value' to `examples` "
                "that works on the seeded demo data"
            ]
    marked = _marked(action, arguments)
    problems: list[str] = values_echo(kit, action, marked)
    kit.model.enqueue(tool_call(name, **marked))
    kit.chat(f"check {name}")
    try:
        card = kit.pending()
    except LookupError:
        kit.model.enqueue(tool_call(name, **arguments))  # the marker may have failed validation
        kit.chat(f"check {name} again")
        try:
            card = kit.pending()
        except LookupError:
            return [f"{name}: no card was shown for {arguments!r} (does its example work on the seeded data for {person}?)"]
        marked = {k: v for k, v in arguments.items() if k not in resolved(action)}  # values_echo() checked those
    if kit.calls(action):
        problems.append(f"{name}: handle() ran before the card was confirmed")
    problems += _echoed(action, card, marked)
    kit.as_person(other)
    if card.confirm() != "wrong_person" or kit.calls(action):
        problems.append(f"{name}: another person ({other}) could confirm the card")
    kit.as_person(person)
    problems += _countersigned(kit, action, card)
    if card.decline() != Status.DECLINED or kit.calls(action):
        problems.append(f"{name}: declining did not end the card with nothing run")
    if action.editable:
        problems += _edit_contract(kit, action, arguments, other)
    return problems


def _countersigned(kit: Any, action: type[Action], card: Any) -> list[str]:
    """A card under the two-person rule: the person's confirm runs nothing and waits, and the
    person cannot give the second signature themself (their decline then still ends it)."""
    from app.extensions import db
    from app.models import Approval

    with kit.app.app_context():
        approval = db.session.get(Approval, card.id)
        rule = approval.countersign if approval is not None else None
    if not rule:
        return []
    name = action.name
    if card.confirm() != Status.COUNTERSIGNING or kit.calls(action):
        return [f"{name}: the person's confirm did not wait for the countersignature ({rule})"]
    if card.countersign() == Status.DONE or kit.calls(action):
        return [f"{name}: the person who asked could countersign their own card"]
    return []


def _edit_contract(kit: Any, action: type[Action], arguments: dict[str, Any], other: str) -> list[str]:
    """An `editable` action: an edit runs nothing and makes a fresh card in the old one's place,
    which another person cannot confirm either."""

    kit.model.enqueue(tool_call(action.name, **arguments))
    kit.chat(f"check editing {action.name}")
    card = kit.pending()
    for field in action.editable:
        if not isinstance(arguments.get(field), str):
            continue
        try:
            fresh = card.edit(**{field: f"{arguments[field]}{MARK}"})
        except ValueError:
            continue  # this field does not take the marker (an address, say): try the next one
        problems = []
        if kit.calls(action):
            problems.append(f"{action.name}: handle() ran on an edit")
        if card.confirm() != "already_decided" or kit.calls(action):
            problems.append(f"{action.name}: the card an edit replaced could still be confirmed")
        kit.as_person(other)
        if fresh.confirm() != "wrong_person" or kit.calls(action):
            problems.append(f"{action.name}: another person ({other}) could confirm an edited card")
        kit.as_person(card_person(kit, card))
        fresh.decline()
        return problems
    return [f"{action.name}: no editable field of its example could be edited (editable = {action.editable!r})"]


def card_person(kit: Any, card: Any) -> str:
    """The email of the person a card belongs to."""
    from app.extensions import db
    from app.models import Approval

    with kit.app.app_context():
        approval = db.session.get(Approval, card.id)
        assert approval is not None
        return str(approval.user.email)


def _marked(action: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The example's free text marked, so the card can be searched for the model's words."""
    return {
        k: f"{v}{MARK}"
        if isinstance(v, str) and k not in allowed_on_card(action) and choices(action.Input, k) is None
        else v  # a closed choice holds no model text
        for k, v in arguments.items()
    }


def _echoed(action: Any, card: Any, marked: dict[str, Any]) -> list[str]:
    """The model's arguments the card shows (unless the action declares it shows them)."""
    shown = " ".join([card.reason, *card.rows.keys(), *map(str, card.rows.values())])
    return [
        f"{action.name}: the card shows the model's argument {key!r} ({value!r}); build the card from "
        f"your own records, or declare shows = ({key!r},) if the person must see it"
        for key, value in marked.items()
        if key not in allowed_on_card(action) and isinstance(value, str) and len(value) >= 3 and value in shown
    ]


def check_all(kit_factory: Any, names: list[str]) -> dict[str, list[str]]:
    """Each action in a fresh app (kit_factory() -> context manager of a Copilot)."""
    results = {}
    for name in names:
        with kit_factory() as kit:
            results[name] = check_action(kit, name)
    return results
