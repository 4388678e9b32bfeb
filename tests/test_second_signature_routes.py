"""The second signature on the other routes: a chat reply's words as the decline's reason, the
test kit's card.decline(reason=…), card.edit(…) and card.refresh(), and MCP following a fresh card."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import ApiToken, Approval, Post, User
from app.status import Status
from tests.fake_chat import chat_fixtures

services, app_config, chat = chat_fixtures()


def model_read(model):
    return "\n".join(str(getattr(p, "content", "")) for request in model.requests for m in request for p in m.parts)


def last_approval(app):
    with app.app_context():
        found = db.session.scalar(sa.select(Approval).order_by(Approval.created_at.desc()).limit(1))
        db.session.expunge(found)
        return found


def test_a_reply_that_is_not_yes_declines_with_its_words_as_the_reason(app, chat, posts, model, handle_calls):
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    chat.say("Not this one, it is still needed\n\n> Delete this post? Reply 'Yes' to confirm.\n> quoted history")
    declined = last_approval(app)
    assert declined.status == Status.DECLINED and handle_calls["n"] == 0
    assert declined.feedback == "Not this one, it is still needed"
    assert '"Not this one, it is still needed"' in model_read(model)
    assert "quoted history" not in model_read(model)


def test_decline_reason_leaves_out_an_email_clients_quote_and_keeps_to_the_limit():
    from app.connectors.receive import decline_reason

    assert decline_reason("Later please\n\nOn Mon, Alice wrote:\nDelete this post?") == "Later please"
    assert decline_reason("> only quoted") == ""
    long = decline_reason("z" * 5000)
    assert len(long) == 1000 and long.endswith("…")


# --- the test kit ------------------------------------------------------------------------------


@pytest.fixture
def kit(tmp_path, countersign_app_factory):
    from app.copilot.kit import migrated_template, running

    template = migrated_template(tmp_path / "template.sqlite3", factory=countersign_app_factory)
    with running(template, tmp_path, factory=countersign_app_factory) as copilot:
        yield copilot


def test_kit_decline_with_a_reason(kit):
    kit.as_person("alice@example.com")
    kit.chat("/send_email to=dana@example.org subject=Hi body=Hello")
    assert kit.pending().decline(reason="Ask me tomorrow") == Status.DECLINED
    assert '"Ask me tomorrow"' in model_read(kit.model)


def test_kit_edit_returns_the_fresh_card_and_confirming_it_sends_the_edit(kit):
    from app.actions.send_email import SendEmail

    kit.as_person("alice@example.com")
    kit.chat("/send_email to=dana@example.org subject=Hi body=Hello")
    card = kit.pending()
    fresh = card.edit(subject="Hello again")
    assert fresh.id != card.id and fresh.rows["Subject"] == "Hello again"
    with pytest.raises(ValueError, match="already_decided"):
        card.edit(subject="Third")
    with pytest.raises(ValueError, match="bad_values"):
        fresh.edit(api_key="x")
    # Queued: the kit has no mail server, so the outbox keeps it (its delivery would end it Sent).
    assert fresh.confirm() == Status.QUEUED and kit.calls(SendEmail) == 1
    assert "Hello again" not in kit.model.seen() and "The person edited: subject." in model_read(kit.model)


def test_kit_refresh_of_a_changed_card(kit):
    from app.actions.delete_post import DeletePost

    kit.as_person("alice@example.com")
    with kit.app.app_context():
        post = db.session.scalar(sa.select(Post).where(Post.title == "Spring meetup"))
        post_id = post.id
    kit.chat(f"/delete_post post={post_id}")
    card = kit.pending()
    with kit.app.app_context():
        db.session.get(Post, post_id).title = "Autumn meetup"
        db.session.commit()
    assert card.confirm() == Status.CHANGED
    assert card.changes == [{"label": "Post", "before": "Spring meetup", "after": "Autumn meetup"}]
    fresh = card.refresh()
    assert fresh.rows["Post"] == "Autumn meetup"
    assert fresh.confirm() == Status.DONE and kit.calls(DeletePost) == 1


# --- MCP ---------------------------------------------------------------------------------------


def test_mcp_follows_an_edit_to_the_fresh_card_and_reads_only_the_names(app, model):
    """The MCP client waits on the card it was given; the person edits it on its page: the client's
    next look finds the fresh card still waiting, then its outcome with the edited names only."""
    import json

    import mcp_types as types

    from app import copilot
    from app.auth import create_token
    from app.copilot.approvals import sign
    from app.mcp import _actor, _answer

    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        create_token(alice)
        token_id = db.session.scalar(sa.select(ApiToken.id).where(ApiToken.user_id == alice.id))
        _, approval = copilot.call_direct(_actor(token_id), "send_email", {"to": "d@example.org", "subject": "Hi", "body": "Yo"})
        person = copilot.person(alice, "web")
        fresh = copilot.answer(approval.id, sign(approval, person.binding), person, "edit", {"subject": "Private words"})
        waiting = _answer(token_id, approval.id, None)
        assert isinstance(waiting, types.InputRequiredResult)
        assert json.loads(waiting.request_state) == {"approval": fresh.id}
        copilot.answer(fresh.id, sign(fresh, person.binding), person, "decline", reason="Too early")
        said = _answer(token_id, approval.id, None).content[0].text
    assert said.startswith("The person edited: subject. The person declined.") and '"Too early"' in said
    assert "Private words" not in said


def test_the_contract_check_edits_an_editable_action(kit):
    from app.copilot.kit import check_action

    assert check_action(kit, "send_email") == []
    with kit.app.app_context():
        edited = db.session.scalars(sa.select(Approval).where(Approval.status == Status.EDITED)).all()
        fresh = db.session.scalars(sa.select(Approval).where(Approval.replaces == edited[0].id)).all()
        assert len(edited) == 1 and [a.status for a in fresh] == [Status.DECLINED]
