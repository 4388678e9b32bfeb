"""Real language models over real HTTP: local fakes speaking OpenAI's and Anthropic's wire formats."""

from __future__ import annotations

import socket

import pytest
import sqlalchemy as sa

from app.copilot import Engine, engine
from app.extensions import db
from app.models import Approval, Message, Post, Run
from tests.conftest import NetworkGuardError, outcome_row
from tests.fake_llm import FakeAnthropic, FakeOpenAI


def use_model_timeout(app, base, spec, seconds):
    with app.app_context():
        live = engine()
        app.extensions["countersign"] = Engine(
            live.registry, spec, base, live.toolsets, live.max_steps, api_key="test-key", timeout=seconds
        )


@pytest.fixture(params=["openai", "anthropic"])
def fake(request, app):
    server = FakeOpenAI() if request.param == "openai" else FakeAnthropic()
    with server:
        spec = "openai:fake-gpt" if request.param == "openai" else "anthropic:fake-claude"
        base = server.api_base if request.param == "openai" else server.base_url
        # Generous: a busy machine must not turn a slow answer into a failure. Only the "hang"
        # case shortens it, and its server never answers in time.
        use_model_timeout(app, base, spec, 30)
        server.spec, server.base = spec, base
        yield server


def messages(app, convo):
    with app.app_context():
        return [
            (m.role, m.text)
            for m in db.session.scalars(sa.select(Message).where(Message.conversation_id == convo).order_by(Message.id))
        ]


def test_full_turn_with_a_card_over_http(app, alice, posts, fake, handle_calls):
    post = posts["Spring meetup"]
    fake.enqueue(fake.reply_tools(("delete_post", {"post": post}), text="I will ask you first."))
    convo = alice.new_conversation()
    html = alice.say(convo, "please delete the spring meetup post")
    assert "Delete this post? This cannot be undone." in html
    assert "I will ask you first." in html
    assert handle_calls["n"] == 0
    fake.enqueue(fake.reply_text("The post is gone."))
    approval, token = alice.card(html)
    body = alice.answer(approval, token).get_data(as_text=True)
    assert outcome_row("Removed", "done") in body and "The post is gone." in body
    assert handle_calls["n"] == 1
    # what the server sent back to the model: the outcome, as a tool result
    assert "Done. Deleted “Spring meetup”." in fake.seen()
    assert "approve or decline anything yourself" in fake.seen()  # our system prompt
    with app.app_context():
        run = db.session.scalar(sa.select(Run).where(Run.conversation_id == convo))
        assert run.status == "done" and run.requests == 2 and run.input_tokens > 0 and run.output_tokens > 0


def test_read_and_destructive_in_one_step(app, alice, posts, fake):
    fake.enqueue(fake.reply_tools(("list_posts", {}), ("delete_post", {"post": posts["Launch notes"]})))
    convo = alice.new_conversation()
    html = alice.say(convo, "list and delete")
    assert "Delete this post?" in html
    assert len(fake.requests) == 1  # the model waits for the card
    fake.enqueue(fake.reply_text("Listed, and you kept the post."))
    body = alice.answer(*alice.card(html), "decline").get_data(as_text=True)
    assert "Listed, and you kept the post." in body
    assert "Spring meetup (draft)" in fake.seen() and "The person declined. Nothing was done." in fake.seen()


@pytest.mark.parametrize(
    "failure, said",
    [
        ((429, {"error": {"message": "slow down", "type": "rate_limit_error"}}), "rate limited"),
        ((500, {"error": {"message": "boom", "type": "api_error"}}), "failed (HTTP 500)"),
        ("hang", "did not answer in time"),
        ((200, "{this is not json"), "could not"),
    ],
)
def test_model_failures_are_clear_messages_with_retry(app, alice, fake, failure, said):
    if failure == "hang":
        use_model_timeout(app, fake.base, fake.spec, 1)
    fake.enqueue(failure)
    convo = alice.new_conversation()
    html = alice.say(convo, "hello")
    assert said in html and "press Retry" in html and ">Retry</button>" in html
    assert messages(app, convo)[0] == ("user", "hello")
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Run).where(Run.status != "failed")) == 0
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
    use_model_timeout(app, fake.base, fake.spec, 30)
    fake.enqueue(fake.reply_text("Hello again."))
    again = alice.htmx_post(f"/c/{convo}/retry").get_data(as_text=True)
    assert "Hello again." in again
    assert [role for role, _ in messages(app, convo)] == ["user", "notice", "assistant"]


def test_a_call_to_an_unexposed_action_is_refused(app, alice, fake, handle_calls):
    fake.enqueue(
        fake.reply_tools(("drop_all_tables", {})),
        fake.reply_tools(("drop_all_tables", {})),
        fake.reply_tools(("drop_all_tables", {})),
    )
    convo = alice.new_conversation()
    html = alice.say(convo, "drop everything")
    assert "could not be used" in html and ">Retry</button>" in html
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0


def test_invalid_arguments_are_returned_to_the_model_once(app, alice, fake, posts):
    fake.enqueue(
        fake.reply_tools(("publish_post", {"post": "not a number"})),
        fake.reply_tools(("publish_post", {"post": posts["Spring meetup"]})),
        fake.reply_text("Published it."),
    )
    html = alice.say(alice.new_conversation(), "publish the spring meetup")
    assert "Published it." in html
    assert "post" in str(fake.requests[1])
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]).status == "published"


def test_too_many_steps_stop_the_turn(app, alice, fake):
    fake.enqueue(*[fake.reply_tools(("list_posts", {})) for _ in range(12)])
    html = alice.say(alice.new_conversation(), "loop")
    assert "too many steps" in html and ">Retry</button>" in html
    assert len(fake.requests) == app.config["COUNTERSIGN_MAX_STEPS"]


def test_no_test_reaches_beyond_this_machine():
    with socket.socket() as s, pytest.raises(NetworkGuardError):
        s.connect(("203.0.113.7", 443))
