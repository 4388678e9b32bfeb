"""The test kit's second-signature answers, mixed into the kit's Card: `card.edit(**values)` and
`card.refresh()` return the fresh card to confirm; `card.changes` are a changed card's rows;
`card.countersign()` is the second person's signature (after `copilot.as_person(…)`)."""

from __future__ import annotations

from typing import Any, Protocol, Self

from app.errors import CountersignError
from app.status import Decision, Status


class Kit(Protocol):
    """What the mixin uses of the kit's Copilot (app.copilot.kit._plugin, which imports this module)."""

    app: Any

    def _actor(self) -> Any: ...

    def _answer(
        self, card: Any, decision: str, values: dict[str, Any] | None = None, reason: str | None = None, second: bool = False
    ) -> str: ...


# What a refused answer says in the kit (the error's name, as a status-like word).
ERRORS = {
    "NotFound": "not_found",
    "WrongPerson": "wrong_person",
    "OwnCountersign": "own_request",
    "AlreadyDecided": "already_decided",
    "Expired": Status.EXPIRED,
    "BadToken": "bad_token",
    "BadValues": "bad_values",
    "FormInvalid": "bad_values",
}


class Revisions:
    """Edit before confirm, and a changed card's Fresh card (app/copilot/approvals/_revise.py)."""

    copilot: Kit
    id: str
    token: str

    def edit(self, **values: Any) -> Self:
        """Edit the card's editable fields: the fresh card to confirm (ValueError naming why not)."""
        return self._revise(Decision.EDIT, values)

    def countersign(self, decline: bool = False, reason: str | None = None) -> str:
        """The second signature, by the kit's current person (`decline`: refuse it instead, with a reason)."""
        return self.copilot._answer(self, Decision.DECLINE if decline else "countersign", reason=reason, second=True)

    def refresh(self) -> Self:
        """A changed card's Fresh card: a new card of the same request, built again."""
        return self._revise(Decision.REFRESH, None)

    @property
    def changes(self) -> list[dict[str, str]]:
        """On a changed card: the rows that differ ({label, before, after})."""
        from app.extensions import db
        from app.models import Approval

        with self.copilot.app.app_context():
            approval = db.session.get(Approval, self.id)
            return list(approval.changes or []) if approval is not None else []

    def _revise(self, decision: str, values: dict[str, Any] | None) -> Self:
        from app.copilot import answer
        from app.copilot.approvals import sign

        kit = self.copilot
        with kit.app.app_context():
            try:
                a = answer(self.id, self.token, kit._actor(), decision, values)
            except CountersignError as error:
                raise ValueError(f"{ERRORS.get(type(error).__name__, type(error).__name__)}: {error.message}") from None
            card: Any = type(self)  # the kit's Card, the one class this mixin is in
            rows = {r["label"]: r["value"] for r in a.rows}
            fresh: Self = card(kit, a.id, a.reason, rows, a.form, sign(a, f"kit:{a.user.email}"))
            return fresh
