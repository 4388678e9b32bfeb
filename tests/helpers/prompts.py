"""The one expected view of a card: the engine's Prompt (approvals.prompt_for) for a viewer, and
what each channel must show of it — the web's HTML, the API's JSON, a chat thread's text, MCP's
elicitation. The channel tests build their expectations here, from the Prompt, not each its own."""

from __future__ import annotations

from datetime import UTC

import sqlalchemy as sa
from markupsafe import escape

from app import copilot
from app.copilot.approvals import Actor, Prompt, prompt_for
from app.extensions import db
from app.models import Approval, Conversation, User


def person(email: str) -> User:
    found = db.session.scalar(sa.select(User).where(User.email == email))
    assert found is not None, email
    return found


def viewer(email: str, channel: str = "web", agent: bool = False, toolsets: tuple[str, ...] | None = None) -> Actor:
    """A credential of this person (its binding is the tests' own: a token's binding changes what
    it may answer with, never whether one is given)."""
    return Actor(user=person(email), binding="web:expected", channel=channel, agent=agent, toolsets=toolsets)


def prompt_of(app, approval_id: str, email: str = "alice@example.com", **credential) -> Prompt:
    """The card as this person (over `channel`, as an `agent`, within `toolsets`) sees it now."""
    with app.app_context():
        approval = db.session.get(Approval, approval_id)
        assert approval is not None, approval_id
        return prompt_for(approval, viewer(email, **credential))


def newest_prompt(app, email: str = "alice@example.com", **credential) -> Prompt:
    """The person's newest card, as they see it now."""
    with app.app_context():
        newest = db.session.scalar(
            sa.select(Approval.id).where(Approval.user_id == person(email).id).order_by(Approval.created_at.desc()).limit(1)
        )
    assert newest is not None, f"no card of {email}"
    return prompt_of(app, newest, email, **credential)


def ask(app, text: str, email: str = "alice@example.com") -> str:
    """A card of this person's, straight through the engine (as the web asks): its id."""
    with app.app_context():
        asker = person(email)
        conversation = Conversation(tenant_id=asker.tenant_id, user_id=asker.id)
        db.session.add(conversation)
        db.session.commit()
        copilot.send_message(conversation, Actor(user=asker, binding="web:test", channel="web"), text)
        found = db.session.scalar(sa.select(Approval.id).where(Approval.conversation_id == conversation.id))
        assert found is not None, f"{text!r} made no card"
        return found


def shown_in_html(prompt: Prompt, html: str) -> None:
    """The web's card shows the Prompt's words and rows (escaped), and a token only when it has one."""
    assert f'id="approval-{prompt.id}"' in html
    assert str(escape(prompt.text)) in html
    for row in prompt.rows:
        assert f"<dt>{escape(row.label)}</dt><dd>{escape(row.value)}</dd>" in html
    assert ('name="token"' in html) == (prompt.answerable or prompt.refresh_token is not None)
    for line in (prompt.outcome, prompt.decided_by):
        if line is not None:
            assert str(escape(line)) in html


def shown_in_json(prompt: Prompt, data: dict) -> None:
    """The API's Prompt object is this Prompt (its token the API's own, given only when it has one)."""
    assert data["id"] == prompt.id and data["type"] == prompt.type and data["action"] == prompt.action
    assert data["reason"] == prompt.text
    assert data["rows"] == [{"label": row.label, "value": row.value} for row in prompt.rows]
    assert data["form"] == prompt.form and data["status"] == prompt.status
    assert (data["token"] is not None) == (prompt.token is not None)
    assert data["outcome"] == (prompt.outcome if prompt.final else None)
    assert data["decided_by"] == prompt.decided_by


def _chat(said: str, connector: str) -> str:
    """As a chat service shows it (Slack escapes &, < and > as entities)."""
    return said.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") if connector == "slack" else said


def shown_in_chat(prompt: Prompt, text: str, connector: str) -> None:
    """A chat thread's card: the sentence on one line, each row on its own, and "Reply 'Yes'"
    only when a reply may answer it."""

    def chat(said: str) -> str:
        return _chat(said, connector)

    assert chat(" ⏎ ".join(line for line in prompt.text.splitlines() if line.strip())) in text
    for row in prompt.rows:
        assert chat(f"{row.label}: {(row.value.splitlines() or [''])[0]}") in text
    assert ("Reply 'Yes' to confirm." in text) == prompt.reply


def shown_settled(prompt: Prompt, text: str, connector: str) -> None:
    """A card's chat message once decided (a button's press edits it): its sentence, then the
    Prompt's chat line (its outcome, who decided)."""
    assert prompt.chat is not None
    assert _chat(prompt.text, connector) in text and _chat(prompt.chat, connector) in text


def shown_in_elicitation(prompt: Prompt, message: str) -> None:
    """MCP's elicitation message: the action's own sentence (a form's own message), never the model's."""
    assert message.startswith(prompt.form["message"] if prompt.form else prompt.text)


def a_prompt(text: str, rows: list[tuple[str, str]], **fields) -> Prompt:
    """A Prompt of a pending card with these words, for a channel's formatting alone (no database)."""
    from datetime import datetime

    from app.copilot.approvals import Row
    from app.status import ApprovalType, Status

    defaults = dict(
        id="0" * 32, type=ApprovalType.CONFIRM, action="send_email", status=Status.PENDING, text=text,
        rows=tuple(Row(label, value) for label, value in rows), form=None,
        expires_at=datetime.now(UTC), seconds_left=0, waiting=True, mine=True, token=None, second_token=None,
        refresh_token=None, reply=True, edit=None, outcome=None, badge=None, decided_by=None, decided_at=None,
        chat=None, told=None, person="alice@example.com", requested_via="web", requested_by_agent=False,
        confirmed_by=None, countersign=None, changes=None, fresh_id=None, replaces=None, edited=None,
    )  # fmt: skip
    return Prompt(**{**defaults, **fields})
