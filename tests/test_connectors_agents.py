"""An agent never moves the person's wait (issue 24, found by a security review): an agent token
that writes into the conversation of a chat thread, as the person waits there on a card, gets a
card marked as an agent's, answered on the web only; the person's "yes" still answers her own card.
Real webhooks in, the fake Telegram/Slack APIs and SMTP out, as tests/test_connectors.py does."""

from __future__ import annotations

import sqlalchemy as sa

from app.auth import create_token
from app.connectors.email import card_message_id
from app.extensions import db
from app.models import ConnectorThread, Post, User
from tests.conftest import api_headers
from tests.fake_chat import chat_fixtures
from tests.helpers.cards import card_of
from tests.helpers.people import agent_token
from tests.helpers.prompts import prompt_of, shown_in_chat

PROMPT = "Reply 'Yes' to confirm."

services, app_config, chat = chat_fixtures()


def agent_says(app, chat, token, text, thread="main"):
    """The agent writes into alice's conversation of that chat thread through the API; the worker
    then runs its turn and posts what the turn said into the thread."""
    with app.app_context():
        conversation = db.session.scalar(sa.select(ConnectorThread.conversation_id).where(ConnectorThread.connector == chat.name))
    response = app.test_client().post(
        f"/api/conversations/{conversation}/messages",
        json={"text": text},
        headers={**api_headers(token), "Prefer": "respond-async"},
    )
    assert response.status_code == 202, response.get_data(as_text=True)
    chat.work()


def alice_says_yes_to(app, chat, post_id):
    """Alice's "yes" in the thread; by email, as a reply to that card's own email (the proof)."""
    if chat.name != "email":
        chat.say("yes")
        return
    with app.app_context():
        wanted = card_message_id(card_of(app, post_id).id)
    card = next(m for m in chat.smtp.inbox.messages if m["Message-ID"] == wanted)
    chat.say("yes", in_reply_to=wanted, references=f"{card['References']} {wanted}")


def posted(chat):
    """The texts posted into the thread, as the person reads them (an email's body decoded)."""
    if chat.name != "email":
        return chat.sent()
    mails = [m for m in chat.smtp.inbox.messages if m["In-Reply-To"] == chat.roots["main"]]
    return [m.get_payload(decode=True).decode().replace("\r\n", "\n") for m in mails]


def left(app, posts, *titles):
    with app.app_context():
        kept = set(db.session.scalars(sa.select(Post.title)))
    return [t for t in titles if t in kept]


def test_an_agents_card_does_not_supersede_the_persons_waiting_card(app, chat, posts):
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    agent_says(app, chat, agent_token(app), f"/delete_post post={posts['Launch notes']}")
    assert card_of(app, posts["Spring meetup"]).status == "pending"
    assert card_of(app, posts["Launch notes"]).status == "pending"


def test_the_persons_yes_answers_her_card_not_the_agents(app, chat, posts, handle_calls):
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    agent_says(app, chat, agent_token(app), f"/delete_post post={posts['Launch notes']}")
    alice_says_yes_to(app, chat, posts["Spring meetup"])
    assert handle_calls["n"] == 1
    assert left(app, posts, "Spring meetup", "Launch notes") == ["Launch notes"]
    assert card_of(app, posts["Launch notes"]).status == "pending"  # still on the web, for alice to answer there


def test_an_agents_card_is_posted_as_an_agents_with_a_link_not_a_reply(app, chat, posts):
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    agent_says(app, chat, agent_token(app), f"/delete_post post={posts['Launch notes']}")
    said = posted(chat)[-1]
    assert "Asked by an agent (token 'laptop') through the API" in said
    assert f"https://countersign.example/approvals/{card_of(app, posts['Launch notes']).id}" in said
    assert PROMPT not in said
    assert "Launch notes" in said  # what it would do, so the person knows what is asked in her name
    shown = prompt_of(app, card_of(app, posts["Launch notes"]).id, channel=chat.name)
    assert not shown.reply  # the engine's rule: an agent's card is never answered by a reply
    shown_in_chat(shown, said, chat.name)


def test_a_yes_after_only_an_agents_card_confirms_nothing(app, chat, posts, handle_calls):
    chat.say("hello")  # the thread's conversation, before anyone asks for anything
    agent_says(app, chat, agent_token(app), f"/delete_post post={posts['Launch notes']}")
    chat.say("yes")
    assert handle_calls["n"] == 0 and card_of(app, posts["Launch notes"]).status == "pending"


def test_the_person_asking_after_the_agent_still_gets_her_own_wait(app, chat, posts, handle_calls):
    chat.say("hello")
    agent_says(app, chat, agent_token(app), f"/delete_post post={posts['Launch notes']}")
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    assert PROMPT in posted(chat)[-1]
    alice_says_yes_to(app, chat, posts["Spring meetup"])
    assert left(app, posts, "Spring meetup", "Launch notes") == ["Launch notes"]
    assert card_of(app, posts["Launch notes"]).status == "pending"


def test_two_agents_each_named_neither_moves_the_wait(app, chat, posts, add_post, handle_calls):
    third = add_post("Old draft")
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    agent_says(app, chat, agent_token(app, "laptop"), f"/delete_post post={posts['Launch notes']}")
    agent_says(app, chat, agent_token(app, "ci-bot"), f"/delete_post post={third}")
    assert "Asked by an agent (token 'laptop')" in posted(chat)[-2]
    assert "Asked by an agent (token 'ci-bot')" in posted(chat)[-1]
    alice_says_yes_to(app, chat, posts["Spring meetup"])
    assert left(app, posts, "Spring meetup", "Launch notes", "Old draft") == ["Launch notes", "Old draft"]


def test_someone_elses_yes_after_an_agents_card_confirms_nothing(app, chat, posts, handle_calls):
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    agent_says(app, chat, agent_token(app), f"/delete_post post={posts['Launch notes']}")
    chat.say("yes", who="bob")
    assert handle_calls["n"] == 0
    assert [card_of(app, posts[t]).status for t in ("Spring meetup", "Launch notes")] == ["pending", "pending"]


def test_the_persons_own_app_token_still_asks_as_the_person(app, chat, posts, handle_calls):
    """A `client` token is the person's own hand (DESIGN §3.1): its card is hers, and waits in the thread."""
    chat.say("hello")
    with app.app_context():
        own = create_token(db.session.scalar(sa.select(User).where(User.email == "alice@example.com")), scope="client")
    agent_says(app, chat, own, f"/delete_post post={posts['Launch notes']}")
    assert PROMPT in posted(chat)[-1]
    alice_says_yes_to(app, chat, posts["Launch notes"])
    assert handle_calls["n"] == 1


def test_what_an_agents_turn_says_in_the_thread_is_marked_as_the_agents(app, chat, posts):
    chat.say("hello")
    agent_says(app, chat, agent_token(app), "what can you do?")
    assert posted(chat)[-1].startswith("Asked by an agent (token 'laptop') through the API:\n")


def test_an_agents_form_in_the_thread_is_marked_as_an_agents(app, chat):
    chat.say("hello")
    agent_says(app, chat, agent_token(app), "/draft_post")
    said = posted(chat)[-1]
    assert said.startswith("Asked by an agent (token 'laptop') through the API")
    assert "Please answer this in Countersign: https://countersign.example/approvals/" in said
