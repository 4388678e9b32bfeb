"""A card finds its person (issue 28 §3, §4): a card an agent asks for over MCP (or with an agent
token on the API) reaches the person's linked Telegram or Slack with its buttons; a press there
answers it through the approvals; the MCP client's retry, the web's live events and the message
itself all show the outcome. The person chooses which accounts get which cards. The MCP server
runs in a process of its own; its queued sending is run here, as a worker would."""

from __future__ import annotations

import time
from datetime import timedelta

import mcp_types as types
import sqlalchemy as sa

from app.copilot import events
from app.extensions import db
from app.models import Approval, ConnectorIdentity, Post, User
from app.status import CardsTo, EventType
from tests.conftest import api_headers
from tests.fake_chat import Chat, chat_fixtures
from tests.helpers.countersign import FOLDER_DELETE, folder  # noqa: F401 (folder: a fixture)
from tests.helpers.mcp import first_leg, mcp_process, retry_leg, server, tokens  # noqa: F401 (fixtures)
from tests.helpers.people import agent_asks, agent_token
from tests.helpers.presses import buttons_of, card_posts, slack_interaction, slack_press, telegram_press

services, app_config, _chat = chat_fixtures()


def dm_cards(chat, external_id):
    """Cards sent to that account's own chat with the bot (not to a thread)."""
    if chat.name == "telegram":
        return [p for p in card_posts(chat.api, "sendMessage") if p["chat_id"] == int(external_id)]
    return [p for p in card_posts(chat.api, "chat.postMessage") if p["channel"] == f"D{external_id}"]  # (its DM channel)


def agent_asks_over_the_api(app, text):
    """An agent token ("ci-bot") says `text` in a new conversation of alice's, queued (202)."""
    conversation = app.test_client().post("/api/conversations", json={}, headers=api_headers(agent_token(app)))
    response = app.test_client().post(
        f"/api/conversations/{conversation.get_json()['id']}/messages",
        json={"text": text},
        headers={**api_headers(agent_token(app, "ci-bot")), "Prefer": "respond-async"},
    )
    assert response.status_code == 202, response.get_data(as_text=True)


def the_approval(app):
    with app.app_context():
        (approval,) = db.session.scalars(sa.select(Approval)).all()
        return approval


def test_an_agents_card_over_mcp_reaches_her_telegram_and_her_press_answers_it(
    app, server, tokens, services, posts, handle_calls
):
    telegram = Chat(app, "telegram", services)  # alice's Telegram account 111 is linked
    first = first_leg(server, tokens["alice"], "delete_post", {"post": posts["Spring meetup"]})
    assert isinstance(first, types.InputRequiredResult)
    telegram.work()  # the worker sends it
    (card,) = dm_cards(telegram, "111")
    assert card["text"].startswith("Asked by an agent over MCP:") and "⚠️ Delete this post? This cannot be undone." in card["text"]
    assert "Post: Spring meetup" in card["text"]
    assert set(buttons_of(card)) == {"Confirm", "Decline", "Open"}
    approval = the_approval(app)
    cursor = "0-0"
    telegram_press(app, telegram, "111", buttons_of(card)["Confirm"], 111, card["sent_as"])
    telegram_press(app, telegram, "111", buttons_of(card)["Confirm"], 111, card["sent_as"])  # twice
    assert handle_calls["n"] == 1
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is None
        assert db.session.get(Approval, approval.id).status == "done"
        changes = [e for e in events.read(approval.conversation_id, cursor, None) if e.type == EventType.APPROVAL]
    assert changes and changes[-1].data["id"] == approval.id  # what her open web page follows, live
    assert "Deleted “Spring meetup”." in card_posts(telegram.api, "editMessageText")[-1]["text"]
    accept = {key: types.ElicitResult(action="accept") for key in first.input_requests}
    result = retry_leg(server, tokens["alice"], "delete_post", {"post": posts["Spring meetup"]}, first.request_state, accept)
    assert result.content[0].text == "Done. Deleted “Spring meetup”."
    assert handle_calls["n"] == 1


def test_an_agents_card_through_the_api_reaches_her_slack_dm(app, services, posts, handle_calls):
    slack = Chat(app, "slack", services)  # alice's U111
    agent_asks_over_the_api(app, f"/delete_post post={posts['Launch notes']}")
    slack.work()
    (card,) = dm_cards(slack, "U111")
    assert card["text"].startswith("Asked by an agent (token 'ci-bot') through the API:")
    ts = card["sent_as"]
    body = slack_interaction("U222", "DU111", ts, buttons_of(card)["Confirm"])  # bob: not his card
    slack_press(app, slack, body)
    assert handle_calls["n"] == 0
    slack_press(app, slack, slack_interaction("U111", "DU111", ts, buttons_of(card)["Confirm"]))
    assert handle_calls["n"] == 1


def test_her_own_cards_stay_where_she_asked_by_default(app, alice, services, posts):
    telegram = Chat(app, "telegram", services)
    conversation = alice.new_conversation()
    alice.say(conversation, f"/delete_post post={posts['Spring meetup']}")
    telegram.work()
    assert dm_cards(telegram, "111") == []


def test_she_chooses_which_account_gets_which_cards(app, alice, services, posts):
    telegram = Chat(app, "telegram", services)
    with app.app_context():
        ident = db.session.scalar(sa.select(ConnectorIdentity.id).where(ConnectorIdentity.external_id == "111"))
    response = alice.client.post(f"/settings/channels/{ident}/cards", data={"cards": "all"}, headers={"X-CSRFToken": alice.csrf})
    assert response.status_code == 302
    conversation = alice.new_conversation()
    alice.say(conversation, f"/delete_post post={posts['Spring meetup']}")
    telegram.work()
    assert len(dm_cards(telegram, "111")) == 1  # all her cards, her own requests' too
    alice.client.post(f"/settings/channels/{ident}/cards", data={"cards": "off"}, headers={"X-CSRFToken": alice.csrf})
    first_conversation = alice.new_conversation()
    alice.say(first_conversation, f"/delete_post post={posts['Launch notes']}")
    telegram.work()
    assert len(dm_cards(telegram, "111")) == 1  # none more
    refused = alice.client.post(
        f"/settings/channels/{ident}/cards", data={"cards": "nonsense"}, headers={"X-CSRFToken": alice.csrf}
    )
    assert refused.status_code == 400


def test_unlinking_stops_delivery(app, alice, server, tokens, services, posts):
    telegram = Chat(app, "telegram", services)
    with app.app_context():
        ident = db.session.scalar(sa.select(ConnectorIdentity.id).where(ConnectorIdentity.external_id == "111"))
    alice.client.post(f"/settings/channels/{ident}/unlink", headers={"X-CSRFToken": alice.csrf})
    first_leg(server, tokens["alice"], "delete_post", {"post": posts["Spring meetup"]})
    telegram.work()
    assert dm_cards(telegram, "111") == []


def test_a_card_waiting_for_its_second_signature_reaches_the_countersigners_chat(app, alice, services, folder):
    """alice confirms a folder delete (an admin must countersign): the admin's linked Telegram gets
    the card with its Open link only (a second signature is given signed in), alice's gets nothing."""
    telegram = Chat(app, "telegram", services)
    with app.app_context():
        admin = db.session.scalar(sa.select(User).where(User.email == "admin@example.com"))
        db.session.add(ConnectorIdentity(connector="telegram", external_id="777", user_id=admin.id))
        db.session.commit()
    conversation = alice.new_conversation()
    alice.say(conversation, FOLDER_DELETE)
    telegram.work()  # the worker runs her turn: the card
    approval_id, token = alice.card(alice.client.get(f"/c/{conversation}").get_data(as_text=True))
    assert "waiting for a countersignature" in alice.answer(approval_id, token).get_data(as_text=True)
    telegram.work()  # and sends its link to the countersigners
    (card,) = dm_cards(telegram, "777")
    assert card["text"].startswith("Your second signature is asked for (alice@example.com confirmed it):")
    assert set(buttons_of(card)) == {"Open"}
    assert dm_cards(telegram, "111") == []


def test_a_card_decided_on_the_web_reads_its_outcome_in_her_telegram(app, alice, services, posts, handle_calls):
    telegram = Chat(app, "telegram", services)
    agent_asks(app, posts)
    telegram.work()
    (card,) = dm_cards(telegram, "111")
    approval = the_approval(app)
    _, token = alice.card(alice.client.get(f"/approvals/{approval.id}").get_data(as_text=True))
    assert alice.answer(approval.id, token).status_code == 200
    telegram.work()
    edit = card_posts(telegram.api, "editMessageText")[-1]
    assert edit["chat_id"] == 111 and edit["message_id"] == card["sent_as"]
    assert "Deleted “Launch notes”." in edit["text"] and "reply_markup" not in edit
    assert handle_calls["n"] == 1


def test_a_card_the_admin_revokes_reads_revoked_in_her_slack(app, sign_in, services, posts):
    slack = Chat(app, "slack", services)
    agent_asks(app, posts)
    slack.work()
    (card,) = dm_cards(slack, "U111")
    approval = the_approval(app)
    admin = sign_in("admin@example.com")
    assert admin.client.post(f"/admin/approvals/{approval.id}/revoke", headers={"X-CSRFToken": admin.csrf}).status_code in (
        200,
        302,
    )
    slack.work()
    edit = card_posts(slack.api, "chat.update")[-1]
    assert edit["channel"] == "DU111" and edit["ts"] == card["sent_as"]
    assert "Revoked" in edit["text"] and "actions" not in str(edit["blocks"])


def test_a_card_left_unseen_reaches_her_chat_after_the_grace_once(app, alice, services, posts):
    """Her own card (from the web), with no page of hers open for CARDS_UNSEEN_AFTER: `flask
    connectors push-unseen` sends it to her linked chat; not while she watches, and only once."""
    from app.extensions import redis_client
    from app.models import User, utcnow

    telegram = Chat(app, "telegram", services)
    alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}")
    telegram.work()  # her turn: the card
    cli = app.test_cli_runner()
    assert cli.invoke(args=["connectors", "push-unseen"]).output == "sent 0\n"  # within its grace
    with app.app_context():
        db.session.execute(sa.update(Approval).values(created_at=utcnow() - timedelta(minutes=10)))
        db.session.commit()
        alice_id = db.session.scalar(sa.select(User.id).where(User.email == "alice@example.com"))
    with app.app_context():
        redis_client.client.zadd(f"streams:{alice_id}", {"a-tab": time.time() + 600})  # a page of hers is open
    assert cli.invoke(args=["connectors", "push-unseen"]).output == "sent 0\n"
    with app.app_context():
        redis_client.client.delete(f"streams:{alice_id}")  # and closed
    assert cli.invoke(args=["connectors", "push-unseen"]).output == "sent 1\n"
    (card,) = dm_cards(telegram, "111")
    assert "⚠️ Delete this post? This cannot be undone." in card["text"] and "Confirm" in buttons_of(card)
    assert cli.invoke(args=["connectors", "push-unseen"]).output == "sent 0\n"  # once


def test_a_post_kept_while_the_unseen_push_sends_is_kept_too(app, alice, services, posts, monkeypatch):
    """`push-unseen` adds where it sent the card to what is kept, read under the card's row: a post
    another job keeps meanwhile (its Slack thread's, say) is not written over."""
    from app.connectors.base import keep_posts
    from app.connectors.telegram import Telegram
    from app.models import utcnow

    telegram = Chat(app, "telegram", services)
    alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}")
    telegram.work()  # her turn: the card
    with app.app_context():
        db.session.execute(sa.update(Approval).values(created_at=utcnow() - timedelta(minutes=10)))
        db.session.commit()
    prompt = Telegram.post_prompt

    def another_job_keeps_a_post(self, chat, approval, text):
        with app.app_context():  # (a worker of its own)
            keep_posts(db.session.get(Approval, approval.id), [{"connector": "slack", "chat": "C1", "message": "1.2"}])
        return prompt(self, chat, approval, text)

    monkeypatch.setattr(Telegram, "post_prompt", another_job_keeps_a_post)
    assert app.test_cli_runner().invoke(args=["connectors", "push-unseen"]).output == "sent 1\n"
    with app.app_context():
        assert [p["connector"] for p in db.session.scalar(sa.select(Approval.posted))] == ["slack", "telegram"]


def test_a_card_decided_while_the_unseen_push_sends_it_reads_its_outcome_there(
    app, alice, services, posts, handle_calls, monkeypatch
):
    """She answers on the web while `push-unseen` is sending her card to her Telegram: the decision
    came before the push kept where the card went, so the push shows the outcome there itself,
    and her Telegram's card does not keep buttons for a card already decided."""
    from app.connectors.telegram import Telegram
    from app.models import utcnow

    telegram = Chat(app, "telegram", services)
    alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}")
    telegram.work()  # her turn: the card
    approval = the_approval(app)
    _, token = alice.card(alice.client.get(f"/approvals/{approval.id}").get_data(as_text=True))
    with app.app_context():
        db.session.execute(sa.update(Approval).values(created_at=utcnow() - timedelta(minutes=10)))
        db.session.commit()
    prompt = Telegram.post_prompt

    def she_answers_meanwhile(self, chat, card, text):
        sent = prompt(self, chat, card, text)
        assert alice.answer(approval.id, token).status_code == 200
        return sent

    monkeypatch.setattr(Telegram, "post_prompt", she_answers_meanwhile)
    assert app.test_cli_runner().invoke(args=["connectors", "push-unseen"]).output == "sent 1\n"
    telegram.work()
    (card,) = dm_cards(telegram, "111")
    edit = card_posts(telegram.api, "editMessageText")[-1]
    assert edit["message_id"] == card["sent_as"] and "reply_markup" not in edit
    assert handle_calls["n"] == 1


def test_a_card_one_linked_account_refuses_still_reaches_the_others(app, services, posts):
    """Slack answers a refused message with HTTP 200 and "ok": false, which now raises: the card
    is not sent there, and her other linked accounts still get it."""
    slack, telegram = Chat(app, "slack", services), Chat(app, "telegram", services)  # alice's U111 and 111
    with app.app_context():  # (both take agents' cards: by default only the first linked does)
        db.session.execute(
            sa.update(ConnectorIdentity).where(ConnectorIdentity.external_id.in_(["U111", "111"])).values(cards=CardsTo.AGENTS)
        )
        db.session.commit()
    services[0].refuse = "channel_not_found"
    try:
        agent_asks_over_the_api(app, f"/delete_post post={posts['Launch notes']}")
        slack.work()
    finally:
        services[0].refuse = None
    assert len(dm_cards(telegram, "111")) == 1
    with app.app_context():
        assert [p["connector"] for p in the_approval(app).posted or []] == ["telegram"]
