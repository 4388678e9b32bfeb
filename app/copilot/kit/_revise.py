"""The test kit's second-signature answers, mixed into testing.Card: `card.edit(**values)` and
`card.refresh()` return the fresh card to confirm; `card.changes` are a changed card's rows;
`card.countersign()` is the second person's signature (after `copilot.as_person(…)`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.errors import CountersignError

if TYPE_CHECKING:
    from app.copilot.kit._plugin import Card, Copilot


class Revisions:
    """Edit before confirm, and a changed card's Fresh card (app/copilot/revise.py)."""

    copilot: Copilot
    id: str
    token: str

    def edit(self, **values: Any) -> Card:
        """Edit the card's editable fields: the fresh card to confirm (ValueError naming why not)."""
        return self._revise("edit", values)

    def countersign(self, decline: bool = False, reason: str | None = None) -> str:
        """The second signature, by the kit's current person (`decline`: refuse it instead, with a reason)."""
        return self.copilot._answer(self, "decline" if decline else "countersign", reason=reason, second=True)  # type: ignore[arg-type]

    def refresh(self) -> Card:
        """A changed card's Fresh card: a new card of the same request, built again."""
        return self._revise("refresh", None)

    @property
    def changes(self) -> list[dict[str, str]]:
        """On a changed card: the rows that differ ({label, before, after})."""
        from app.extensions import db
        from app.models import Approval

        with self.copilot.app.app_context():
            approval = db.session.get(Approval, self.id)
            return list(approval.changes or []) if approval is not None else []

    def _revise(self, decision: str, values: dict[str, Any] | None) -> Card:
        from app.copilot.approvals._tokens import sign
        from app.copilot.kit._plugin import ERRORS, Card
        from app.copilot.turns import _agent as agent

        kit = self.copilot
        with kit.app.app_context():
            try:
                a = agent.answer(self.id, self.token, kit._actor(), decision, values)
            except CountersignError as error:
                raise ValueError(f"{ERRORS.get(type(error).__name__, type(error).__name__)}: {error.message}") from None
            return Card(kit, a.id, a.reason, {r["label"]: r["value"] for r in a.rows}, a.form, sign(a, f"kit:{a.user.email}"))
