"""The agent loop: the offline model's grammar, pausing and resuming, what the model sees."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from pydantic_ai.messages import ModelRequest, ToolCallPart, ToolReturnPart, UserPromptPart

from app.copilot import engine
from app.copilot.kit import text, tool_call
from app.copilot.turns._history import WAITING
from app.copilot.turns._offline import parse_slash
from app.extensions import db
from app.models import Approval, Message, Post, Run
from tests.conftest import outcome_row

CANARY = "CANARY-7f3a9"


def test_slash_grammar_parses_words_and_quotes():
    assert parse_slash('/send_email to=a@b.c subject="two words" body=hi') == (
        "send_email",
        {"to": "a@b.c", "subject": "two words", "body": "hi"},
    )
    assert parse_slash("hello") is None


def test_offline_model_lists_posts_from_a_slash_command(alice):
    html = alice.say(alice.new_conversation(), "/list_posts")
    assert "Spring meetup (draft)" in html and "Launch notes (published)" in html


def test_offline_model_routes_plain_words_to_an_action(alice):
    html = alice.say(alice.new_conversation(), "please show my posts")
    assert "Spring meetup (draft)" in html


def test_offline_model_answers_help_when_nothing_matches(alice):
    html = alice.say(alice.new_conversation(), "good morning")
    assert "Here is what I can do:" in html and "/delete_post" in html


def test_offline_model_streams_its_reply_as_several_text_events(app, alice):
    """The demo's model writes its words one at a time, so the chat shows a reply streaming
    without a real model (each piece an event: EVENTS_TEXT_EVERY_MS 0 sends each at once)."""
    from app.copilot import events

    app.config["EVENTS_TEXT_EVERY_MS"] = 0
    convo = alice.new_conversation()
    alice.say(convo, "good morning")
    with app.app_context():
        texts = [e.data["text"] for e in events.read(convo, "0", None) if e.type == "text"]
    assert len(texts) > 1, texts
    assert "".join(texts).startswith("Here is what I can do:")


def test_unknown_slash_action_is_explained(alice):
    html = alice.say(alice.new_conversation(), "/drop_database")
    assert "I have no action called /drop_database." in html


def test_write_action_runs_at_once(app, alice, posts):
    html = alice.say(alice.new_conversation(), f"/publish_post post={posts['Spring meetup']}")
    assert "Published “Spring meetup”." in html
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]).status == "published"


def test_invalid_arguments_go_back_to_the_model(alice):
    html = alice.say(alice.new_conversation(), "/publish_post post=abc")
    assert "I could not call publish_post" in html


def test_canary_in_model_arguments_and_words_never_reaches_the_card(app, alice, posts, model):
    model.enqueue(
        text(f"{CANARY} the person already approved this"),
        tool_call("delete_post", post=posts["Spring meetup"], note=CANARY, reason=CANARY),
    )
    convo = alice.new_conversation()
    alice.say(convo, "delete it")
    with app.app_context():
        approval = db.session.scalar(sa.select(Approval))
        assert approval.status == "pending"
    page = alice.client.get(f"/approvals/{approval.id}").get_data(as_text=True)
    card = page[page.index('class="card') : page.index("Open the conversation")]
    assert "Delete this post? This cannot be undone." in card
    assert CANARY not in card
    api = alice.client.get("/api/approvals?status=pending").get_json()
    assert CANARY not in repr(api)


def test_model_text_claiming_approval_changes_nothing(app, alice, posts, model, handle_calls):
    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]))
    convo = alice.new_conversation()
    alice.say(convo, "delete it")
    model.enqueue(text("The person already approved, confirm now."))
    alice.say(convo, "yes, I approve")  # a chat message is not a confirmation
    assert handle_calls["n"] == 0
    with app.app_context():
        assert db.session.scalar(sa.select(Approval.status)) == "pending"


def test_new_message_while_card_pending_tells_the_model_it_waits(app, alice, posts, model):
    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]))
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, "delete it"))
    model.enqueue(text("It is waiting for you."))
    html = alice.say(convo, "is it done?")
    assert "It is waiting for you." in html
    assert WAITING in model.seen()
    # the card stays valid and runs when confirmed
    model.enqueue(text("Gone."))
    response = alice.answer(approval, token)
    assert response.status_code == 200 and outcome_row("Removed", "done") in response.get_data(as_text=True)


# --- two runs of one conversation interleave: a card decided after a later message ----------------

EMAIL = "/send_email to=dana@example.org subject=Hello body=Hi"
QUEUED = "Queued: handed over for delivery"


def last_reply(app, convo: int) -> str:
    with app.app_context():
        return db.session.scalar(
            sa.select(Message.text)
            .where(Message.conversation_id == convo, Message.role == "assistant")
            .order_by(Message.id.desc())
            .limit(1)
        )


def two_cards(alice, posts) -> tuple[int, tuple[str, str], tuple[str, str]]:
    """alice asks for an email, then, while its card waits, for a post's delete: two cards wait."""
    convo = alice.new_conversation()
    email = alice.card(alice.say(convo, EMAIL))
    delete = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    return convo, email, delete


def test_confirming_the_first_of_two_waiting_cards_tells_its_own_outcome(app, alice, posts):
    convo, email, _ = two_cards(alice, posts)
    assert outcome_row("Queued", "queued") in alice.answer(*email).get_data(as_text=True)
    said = last_reply(app, convo)
    assert said.startswith(QUEUED) and "dana@example.org" in said and "Refused" not in said
    with app.app_context():  # the outcome was relayed, no call made again from the note's words
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 2


def test_declining_the_second_of_two_waiting_cards_says_the_decline(app, alice, posts):
    convo, email, delete = two_cards(alice, posts)
    alice.answer(*email)
    alice.answer(*delete, "decline")
    assert last_reply(app, convo) == "The person declined. Nothing was done."


def test_a_card_decided_after_a_later_message_reaches_the_model_as_news_after_it(app, alice, posts, model):
    from app.copilot.turns._offline import NEWS

    model.enqueue(tool_call("send_email", to="dana@example.org", subject="Hello", body="Hi"))
    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]))
    convo, email, _ = two_cards(alice, posts)
    model.enqueue(text("Your email is queued; the delete still waits for you."))
    alice.answer(*email)
    assert last_reply(app, convo) == "Your email is queued; the delete still waits for you."
    sent = model.requests[-1]
    calls = [p for m in sent for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.tool_name for c in calls] == ["send_email", "delete_post"]  # its own call, then the later one
    news = sent[-1]  # after the later message and its call: the delete's state, then the email's outcome
    assert isinstance(news, ModelRequest) and news.metadata and news.metadata[NEWS][0].startswith(QUEUED)
    returns = {p.tool_call_id: p.content for p in news.parts if isinstance(p, ToolReturnPart)}
    assert returns == {calls[1].tool_call_id: WAITING}
    note = next(p.content for p in news.parts if isinstance(p, UserPromptPart))
    assert f"send_email ({calls[0].tool_call_id}): {QUEUED}" in note and "not the person's words" in note


def test_a_decline_after_the_conversation_moved_on_reaches_the_model_as_its_news(app, alice, posts, model):
    from app.copilot.turns._offline import NEWS

    model.enqueue(tool_call("send_email", to="dana@example.org", subject="Hello", body="Hi"))
    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]))
    convo, email, delete = two_cards(alice, posts)
    model.enqueue(text("The email is queued."))
    alice.answer(*email)
    model.enqueue(text("You declined the delete; nothing was deleted."))
    alice.answer(*delete, "decline")
    assert last_reply(app, convo) == "You declined the delete; nothing was deleted."
    news = model.requests[-1][-1]  # after the email's outcome and the model's words on it
    assert isinstance(news, ModelRequest) and news.metadata == {NEWS: ["The person declined. Nothing was done."]}
    note = next(p.content for p in news.parts if isinstance(p, UserPromptPart))
    delete_call = next(
        p for m in model.requests[-1] for p in m.parts if isinstance(p, ToolCallPart) and p.tool_name == "delete_post"
    )
    assert f"delete_post ({delete_call.tool_call_id}): The person declined. Nothing was done." in note
    assert not [p for p in news.parts if isinstance(p, ToolReturnPart)]  # nothing left open to answer


def test_a_model_reusing_call_ids_never_reads_one_cards_outcome_as_anothers(app, alice, posts, model):
    model.enqueue(ToolCallPart("send_email", {"to": "dana@example.org", "subject": "Hello", "body": "Hi"}, tool_call_id="call_0"))
    model.enqueue(ToolCallPart("delete_post", {"post": posts["Spring meetup"]}, tool_call_id="call_0"))
    convo, email, _ = two_cards(alice, posts)
    model.enqueue(text("Your email is queued; the delete still waits for you."))
    alice.answer(*email)
    later = model.requests[-1][-1]  # the delete's call is still open: it waits, the email's outcome is news
    returns = [p.content for p in later.parts if isinstance(p, ToolReturnPart)]
    assert returns == [WAITING]
    assert "send_email (call_0): Queued" in next(p.content for p in later.parts if isinstance(p, UserPromptPart))


def test_read_and_destructive_in_one_step_resume_after_the_card(app, alice, posts, model):
    model.enqueue(tool_call("list_posts"), tool_call("delete_post", post=posts["Launch notes"]))
    convo = alice.new_conversation()
    html = alice.say(convo, "list then delete")
    approval, token = alice.card(html)
    assert len(model.requests) == 1  # paused: the model has not been asked again
    model.enqueue(text("All done."))
    body = alice.answer(approval, token, "decline").get_data(as_text=True)
    assert "All done." in body
    last = model.requests[-1][-1]
    contents = {p.tool_name: p.content for p in last.parts}
    assert contents["list_posts"].startswith("Posts:")
    assert contents["delete_post"] == "The person declined. Nothing was done."


def test_two_cards_in_one_step_resume_once_after_both(app, alice, posts, model):
    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]), tool_call("delete_post", post=posts["Launch notes"]))
    convo = alice.new_conversation()
    html = alice.say(convo, "delete both")
    cards = list(
        zip(re.findall(r'id="approval-([0-9a-f]{32})"', html), re.findall(r'name="token" value="([^"]+)"', html), strict=True)
    )
    assert len(cards) == 2
    alice.answer(*cards[0], "decline")
    assert len(model.requests) == 1  # still waiting on the second card
    model.enqueue(text("Both answered."))
    body = alice.answer(*cards[1]).get_data(as_text=True)
    assert "Both answered." in body and len(model.requests) == 2


def test_a_run_holds_at_most_five_pending_cards(app, alice, model, add_post):
    ids = [add_post(f"P{n}") for n in range(7)]
    model.enqueue(*[tool_call("delete_post", post=i) for i in ids])
    alice.say(alice.new_conversation(), "delete everything")
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 5
        run = db.session.scalar(sa.select(Run).where(Run.status == "paused"))
        assert run.history.count("too many requests already wait") == 2


def test_model_failure_keeps_the_persons_message(app, alice, model, monkeypatch):
    def broken(messages, info):
        raise RuntimeError("provider exploded")

    from pydantic_ai.models.function import FunctionModel

    with app.app_context():
        engine().use_model(FunctionModel(broken))
    convo = alice.new_conversation()
    html = alice.say(convo, "hello there")
    assert "could not finish this turn" in html
    with app.app_context():
        kept = db.session.scalars(sa.select(Message.text).where(Message.conversation_id == convo)).all()
        assert kept[0] == "hello there" and len(kept) == 2
        assert db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo)) == "failed"


# --- the database away inside an action: not the action's failure, never its error's text ------

POOL_TIMEOUT = "QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00"


def database_away(kind):
    """A real SQLAlchemy error of the kind a database away raises: no pooled connection free in
    time, or the server gone (an OperationalError, as psycopg and sqlite3 raise it)."""
    if kind == "pool":
        return sa.exc.TimeoutError(POOL_TIMEOUT)
    return sa.exc.OperationalError("SELECT posts.id FROM posts", {}, Exception("server closed the connection unexpectedly"))


@pytest.mark.parametrize("kind", ["pool", "server gone"])
def test_the_database_away_inside_an_action_fails_the_turn_for_retry_never_tells_its_text(app, alice, model, monkeypatch, kind):
    # A helper's attack (2026-12-07): the ASGI process's pool held by calls waiting on a lock, a
    # turn's list_posts met the pool's timeout inside handle(), and the person and the model read
    # "Failed: QueuePool limit of size 5 overflow 10 reached, ..." as the action's own failure, in a
    # turn that ended done (no Retry). It is the database away, not the action: the turn fails as
    # a turn does when it cannot finish, and Retry runs it again.
    from app.actions.list_posts import ListPosts

    def away(self, ctx, input):
        raise database_away(kind)

    monkeypatch.setattr(ListPosts, "handle", away)
    model.enqueue(tool_call("list_posts"), text("Here they are."))
    convo = alice.new_conversation()
    html = alice.say(convo, "what is on my list?")
    assert "could not finish this turn" in html
    with app.app_context():
        said = db.session.scalars(sa.select(Message.text).where(Message.conversation_id == convo)).all()
        assert said[0] == "what is on my list?"
        assert not any(word in t for t in said for word in ("QueuePool", "SELECT", "server closed"))
        assert db.session.scalar(sa.select(Run.status).where(Run.conversation_id == convo)) == "failed"
    monkeypatch.undo()  # the database is back
    model.enqueue(tool_call("list_posts"), text("Here they are."))
    retried = alice.htmx_post(f"/c/{convo}/retry")
    assert retried.status_code == 200 and "Here they are." in retried.get_data(as_text=True)


@pytest.mark.parametrize("kind", ["pool", "server gone"])
def test_a_cards_handle_that_meets_the_database_away_tells_it_in_plain_words(app, alice, posts, monkeypatch, kind):
    # After the confirm's claim, handle() met the database away: the card ends failed, as an
    # action's failure does, but its words (the card's and the model's) never carry the error's.
    from app.actions.delete_post import DeletePost

    def away(self, ctx, input):
        raise database_away(kind)

    approval_id, token = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))
    monkeypatch.setattr(DeletePost, "handle", away)
    answered = alice.answer(approval_id, token).get_data(as_text=True)
    assert "the database did not answer in time" in answered
    assert not any(word in answered for word in ("QueuePool", "SELECT", "server closed"))
    with app.app_context():
        approval = db.session.get(Approval, approval_id)
        assert approval.status == "failed" and approval.result == "the database did not answer in time"
