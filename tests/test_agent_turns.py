"""An agent never moves the person's wait, nor speaks in her name (issue 24, a red-team review):
an agent credential retries or stops only the turns it started itself; the model reads an agent's
words marked as an agent's; a card the model asks for after reading them is an agent's. Real
webhooks in and the fake Telegram API out (tests/fake_chat.py); the model streams (tests/streamed.py)."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.connectors.base import wait_key
from app.extensions import db, redis_client
from app.models import Approval, ConnectorThread, Run, User
from tests.conftest import api_headers
from tests.fake_chat import Chat, chat_fixtures
from tests.helpers.cards import card_of
from tests.helpers.people import agent_token

services, app_config, _ = chat_fixtures()


@pytest.fixture
def telegram(app, services):
    return Chat(app, "telegram", services)


def conversation_of(app, chat):
    with app.app_context():
        return db.session.scalar(sa.select(ConnectorThread.conversation_id).where(ConnectorThread.connector == chat.name))


def as_agent(app, token, path, **body):
    return app.test_client().post(path, json=body, headers={**api_headers(token), "Prefer": "respond-async"})


def runs_of(app, convo):
    with app.app_context():
        return [
            (r.status, r.agent) for r in db.session.scalars(sa.select(Run).where(Run.conversation_id == convo).order_by(Run.id))
        ]


def her_failed_turn(app, telegram, posts, streamed):
    """Alice asks in the thread to delete 'Launch notes'; that turn fails (the model broke)."""
    telegram.say("hello")
    streamed.enqueue("Deleting", fail=RuntimeError("the provider hung up"))
    telegram.say(f"/delete_post post={posts['Launch notes']}")
    convo = conversation_of(app, telegram)
    assert runs_of(app, convo)[-1] == ("failed", False)
    return convo


def her_wait(app, telegram):
    with app.app_context():
        thread = db.session.scalar(sa.select(ConnectorThread).where(ConnectorThread.connector == telegram.name))
        return redis_client.client.get(wait_key(telegram.name, thread.thread_key, thread.user_id))


def test_an_agent_cannot_retry_the_persons_failed_turn(app, telegram, posts, streamed):
    convo = her_failed_turn(app, telegram, posts, streamed)
    refused = as_agent(app, agent_token(app), f"/api/conversations/{convo}/retry")
    assert refused.status_code == 403
    assert "only the turns it started itself" in refused.get_json()["message"]
    telegram.work()
    assert runs_of(app, convo)[-1] == ("failed", False)  # nothing re-queued


def test_an_agents_refused_retry_makes_no_card_in_her_name_and_opens_no_wait(app, telegram, posts, streamed):
    convo = her_failed_turn(app, telegram, posts, streamed)
    as_agent(app, agent_token(app), f"/api/conversations/{convo}/retry")
    telegram.work()
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Approval)) == 0
    assert her_wait(app, telegram) is None
    assert not any("Reply 'Yes' to confirm." in t for t in telegram.sent())


def test_an_agent_cannot_stop_the_persons_turn(app, telegram):
    telegram.say("hello")
    convo = conversation_of(app, telegram)
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        hers = api_headers(create_token(alice, scope="client"))
    said = app.test_client().post(
        f"/api/conversations/{convo}/messages", json={"text": "list my posts"}, headers={**hers, "Prefer": "respond-async"}
    )
    assert said.status_code == 202 and runs_of(app, convo)[-1] == ("queued", False)
    refused = as_agent(app, agent_token(app), f"/api/conversations/{convo}/stop")
    assert refused.status_code == 403 and "only the turns it started itself" in refused.get_json()["message"]
    telegram.work()
    assert runs_of(app, convo)[-1] == ("done", False)
    assert not any(t.startswith("Stopped.") for t in telegram.sent())


def test_an_agent_can_stop_its_own_turn(app, telegram):
    telegram.say("hello")
    convo = conversation_of(app, telegram)
    token = agent_token(app)
    assert as_agent(app, token, f"/api/conversations/{convo}/messages", text="list my posts").status_code == 202
    stopping = as_agent(app, token, f"/api/conversations/{convo}/stop")
    assert stopping.status_code == 200 and stopping.get_json()["stopping"] is True
    assert runs_of(app, convo)[-1] == ("stopped", True)


def test_an_agent_can_retry_its_own_failed_turn(app, telegram, streamed):
    telegram.say("hello")
    convo = conversation_of(app, telegram)
    token = agent_token(app)
    streamed.enqueue("Looking", fail=RuntimeError("the provider hung up"))
    as_agent(app, token, f"/api/conversations/{convo}/messages", text="list my posts")
    telegram.work()
    assert runs_of(app, convo)[-1] == ("failed", True)
    assert as_agent(app, token, f"/api/conversations/{convo}/retry").status_code == 202
    telegram.work()
    assert runs_of(app, convo)[-1] == ("done", True)


def test_another_agent_token_cannot_retry_an_agents_failed_turn(app, telegram, streamed):
    telegram.say("hello")
    convo = conversation_of(app, telegram)
    streamed.enqueue("Looking", fail=RuntimeError("the provider hung up"))
    as_agent(app, agent_token(app), f"/api/conversations/{convo}/messages", text="list my posts")
    telegram.work()
    assert as_agent(app, agent_token(app, name="ci"), f"/api/conversations/{convo}/retry").status_code == 403


def test_the_model_reads_an_agents_message_marked_as_an_agents(app, telegram, streamed):
    telegram.say("hello")
    convo = conversation_of(app, telegram)
    as_agent(app, agent_token(app), f"/api/conversations/{convo}/messages", text="Also delete Launch notes")
    telegram.work()
    told = json.dumps(json.loads(streamed.seen().splitlines()[-1]))
    assert "[Written by an agent (token 'laptop'), not by the person:] Also delete Launch notes" in told


def test_the_persons_own_message_reaches_the_model_unmarked(app, telegram, streamed):
    telegram.say("hello there")
    told = json.dumps(json.loads(streamed.seen().splitlines()[-1]))
    assert "hello there" in told and "Written by an agent" not in told


def test_a_card_asked_for_after_an_agents_words_is_the_agents_and_opens_no_wait(app, telegram, posts, streamed):
    """Her card waits; an agent writes into her conversation; after her "yes" the model, having
    read the agent's words, asks for another card: it is marked as the agent's, and her next
    "yes" in the thread answers nothing."""
    telegram.say(f"/delete_post post={posts['Spring meetup']}")
    convo = conversation_of(app, telegram)
    as_agent(app, agent_token(app), f"/api/conversations/{convo}/messages", text="Now delete Launch notes")
    telegram.work()
    streamed.enqueue("Now that one", calls=[("delete_post", {"post": posts["Launch notes"]})])
    telegram.say("yes")
    card = card_of(app, posts["Launch notes"])
    assert card.requested_by_agent is True and card.status == "pending"
    # The new card's own post (the old card's edit to "Deleted" is a job of its own, so it may land
    # before or after it; the agent's turn's words carry the same "Asked by an agent" prefix).
    (posted,) = [text for text in telegram.sent() if "Post: Launch notes" in text]
    assert posted.startswith("Asked by an agent (token 'laptop') through the API: a reply here cannot answer it.")
    telegram.say("yes")
    assert card_of(app, posts["Launch notes"]).status == "pending"
    with app.app_context():
        assert db.session.get(Approval, card.id).requested_via.startswith("api:pat:")


def test_her_card_asked_before_the_agents_queued_words_were_read_is_hers(app, telegram, posts):
    """An agent's message queued behind her turn has not reached the model when her turn asks."""
    telegram.say("hello")
    convo = conversation_of(app, telegram)
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        hers = api_headers(create_token(alice, scope="client"))
    app.test_client().post(
        f"/api/conversations/{convo}/messages",
        json={"text": f"/delete_post post={posts['Spring meetup']}"},
        headers={**hers, "Prefer": "respond-async"},
    )
    as_agent(app, agent_token(app), f"/api/conversations/{convo}/messages", text="hello from the agent")
    telegram.work()
    assert card_of(app, posts["Spring meetup"]).requested_by_agent is False
