"""Buttons that name their card (issue 28 §2): a card posted to Telegram carries an inline keyboard,
one posted to Slack Block Kit buttons; a press answers that card and no other, once, through the
approvals; anyone else's press, a forged or moved button, a stale or unsigned interaction decides
nothing (each audited); the message then reads the outcome and who decided. Real webhooks in, the
fake Telegram and Slack APIs out."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from app.connectors.presses import FORGED, NOT_YOURS
from app.extensions import db
from app.models import Approval, AuditEvent
from tests.fake_chat import Chat, chat_fixtures
from tests.helpers.presses import buttons_of, card_posts, slack_interaction, slack_press, telegram_press
from tests.helpers.prompts import newest_prompt, shown_in_chat, shown_settled

services, app_config, _chat = chat_fixtures()


@pytest.fixture(params=["telegram", "slack"])
def chat(request, app, services):
    return Chat(app, request.param, services)


def ask_delete(chat, posts, title="Spring meetup"):
    chat.say(f"/delete_post post={posts[title]}")
    method = "sendMessage" if chat.name == "telegram" else "chat.postMessage"
    return card_posts(chat.api, method)[-1]


def ask_two(chat, posts, model):
    """One turn asks for two cards: both wait in the thread."""
    from app.copilot.kit import tool_call

    model.enqueue(tool_call("delete_post", post=posts["Spring meetup"]), tool_call("delete_post", post=posts["Launch notes"]))
    chat.say("delete both")
    method = "sendMessage" if chat.name == "telegram" else "chat.postMessage"
    return [p for p in card_posts(chat.api, method) if "Confirm" in buttons_of(p)][-2:]


def press(app, chat, card, label, presser="alice", body=None):
    """Press the card's button `label` as `presser` (a name in fake_chat.IDS, or a raw id)."""
    from tests.fake_chat import IDS

    who = IDS[chat.name].get(presser, presser)
    value = buttons_of(card)[label]
    if chat.name == "telegram":
        return telegram_press(app, chat, who, value, card["chat_id"], message_id(chat, card))
    return slack_press(app, chat, body or slack_interaction(who, card["channel"], message_id(chat, card), value))


def message_id(chat, card):
    """The id the fake API gave the card's message (Telegram's message_id, Slack's ts)."""
    return card["sent_as"]


def statuses(app):
    with app.app_context():
        return [a.status for a in db.session.scalars(sa.select(Approval).order_by(Approval.created_at))]


def refusals(app):
    with app.app_context():
        return [(e.outcome, e.detail) for e in db.session.scalars(sa.select(AuditEvent).order_by(AuditEvent.id))]


def edits(chat):
    return card_posts(chat.api, "editMessageText" if chat.name == "telegram" else "chat.update")


def told(chat):
    """What the presser alone was told (an alert, an ephemeral message)."""
    method = "answerCallbackQuery" if chat.name == "telegram" else "chat.postEphemeral"
    return [p.get("text") for p in card_posts(chat.api, method) if p.get("text")]


def test_a_card_in_a_thread_carries_its_buttons(app, chat, posts):
    card = ask_delete(chat, posts)
    shown_in_chat(newest_prompt(app, channel=chat.name), card["text"], chat.name)  # the engine's Prompt
    assert set(buttons_of(card)) == {"Confirm", "Decline", "Open"}
    assert buttons_of(card)["Open"].startswith("https://countersign.example/approvals/")


def test_a_press_of_confirm_answers_the_card_once_and_the_message_reads_its_outcome(app, chat, posts, handle_calls):
    card = ask_delete(chat, posts)
    press(app, chat, card, "Confirm")
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]
    outcome = edits(chat)[-1]
    assert "Deleted “Spring meetup”." in outcome["text"] and "Confirmed by" in outcome["text"]
    shown_settled(newest_prompt(app, channel=chat.name), outcome["text"], chat.name)  # the engine's Prompt
    assert "reply_markup" not in outcome and "actions" not in str(outcome.get("blocks"))  # no buttons left
    press(app, chat, card, "Confirm")  # a double press, or the service's redelivery: acts once
    press(app, chat, card, "Decline")
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]
    assert [o for o, d in refusals(app) if o == "refused_attempt"] == ["refused_attempt", "refused_attempt"]


def test_a_press_of_decline_declines(app, chat, posts, handle_calls):
    card = ask_delete(chat, posts)
    press(app, chat, card, "Decline")
    assert handle_calls["n"] == 0 and statuses(app) == ["declined"]
    assert "Declined" in edits(chat)[-1]["text"]


def test_someone_elses_press_decides_nothing(app, chat, posts, handle_calls):
    """Bob, in the same chat, presses alice's card: he is told no, it still waits for her."""
    card = ask_delete(chat, posts)
    press(app, chat, card, "Confirm", presser="bob")
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    assert told(chat)[-1] == NOT_YOURS and not edits(chat)
    assert ("refused_attempt", "wrong_person_or_session") in refusals(app)
    press(app, chat, card, "Confirm")  # her own press still works
    assert handle_calls["n"] == 1


def test_an_unknown_account_decides_nothing(app, chat, posts, handle_calls):
    card = ask_delete(chat, posts)
    press(app, chat, card, "Confirm", presser="999" if chat.name == "telegram" else "U999")
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    assert ("unknown_presser", "from " + ("999" if chat.name == "telegram" else "U999")) in refusals(app)


def test_a_forged_or_moved_button_decides_nothing(app, chat, posts, handle_calls, model):
    """A value the app did not make (another card's id under this card's mark), or this card's
    button copied into another chat, is refused before any card is read."""
    card, other = ask_two(chat, posts, model)
    theirs, mine = buttons_of(other)["Confirm"], buttons_of(card)["Confirm"]
    forged = mine[:2] + theirs[2:34] + mine[34:]  # the other card's id, this card's mac
    if chat.name == "telegram":
        telegram_press(app, chat, "111", forged, card["chat_id"], message_id(chat, card))
        telegram_press(app, chat, "111", mine, -1002, message_id(chat, card))  # moved to another chat
    else:
        slack_press(app, chat, slack_interaction("U111", card["channel"], message_id(chat, card), forged))
        slack_press(app, chat, slack_interaction("U111", "C2", message_id(chat, card), mine))
    assert handle_calls["n"] == 0 and statuses(app) == ["pending", "pending"]
    assert told(chat)[-2:] == [FORGED, FORGED]
    assert [o for o, _ in refusals(app)].count("forged_button") == 2


def test_two_cards_in_one_thread_are_answered_each_by_its_own_button(app, chat, posts, handle_calls, model):
    first, second = ask_two(chat, posts, model)
    assert statuses(app) == ["pending", "pending"]  # the newer card took the thread's "yes", not the older card's place
    press(app, chat, second, "Decline")
    press(app, chat, first, "Confirm")
    assert statuses(app) == ["done", "declined"] and handle_calls["n"] == 1


def test_telegram_a_yes_replying_to_another_cards_message_answers_neither(app, services, posts, handle_calls, model):
    """Telegram says which message a message replies to: a "yes" sent with Reply on the older card
    (still waiting for its buttons) is about that card, so it does not confirm the newer one, whose
    wait the thread's "yes" would answer; a "yes" replying to the newer card does."""
    chat = Chat(app, "telegram", services)
    first, second = ask_two(chat, posts, model)
    chat.say("yes", reply_to_message={"message_id": first["sent_as"], "chat": {"id": first["chat_id"]}})
    assert statuses(app) == ["pending", "pending"] and handle_calls["n"] == 0
    chat.say("yes", reply_to_message={"message_id": second["sent_as"], "chat": {"id": second["chat_id"]}})
    assert statuses(app) == ["pending", "done"] and handle_calls["n"] == 1


def test_an_unsigned_or_stale_slack_press_is_refused_and_audited(app, services, posts, handle_calls):
    chat = Chat(app, "slack", services)
    card = ask_delete(chat, posts)
    body = slack_interaction("U111", card["channel"], message_id(chat, card), buttons_of(card)["Confirm"])
    assert slack_press(app, chat, body, secret="not-the-secret").status_code == 401
    assert slack_press(app, chat, body, stamp=int(time.time()) - 600).status_code == 401
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    assert [(o, d) for o, d in refusals(app) if o == "unverified_press"] == [
        ("unverified_press", "bad signature"),
        ("unverified_press", "stale or malformed timestamp"),
    ]
    assert slack_press(app, chat, body).status_code == 200  # the same press, signed now: once
    assert slack_press(app, chat, body).status_code == 200  # replayed within the window: acts once
    assert handle_calls["n"] == 1


def test_a_countersigned_card_has_only_its_open_link(app, chat, posts, monkeypatch):
    from app.actions.delete_post import DeletePost

    monkeypatch.setattr(DeletePost, "countersign", "admin")
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    assert all("Confirm" not in buttons_of(p) for p in chat.api.posts if "reply_markup" in p or "blocks" in p)


def test_a_telegram_button_pressed_on_slack_decides_nothing(app, services, posts, handle_calls):
    """The mark binds the service too: a value made for a Telegram chat, pressed in a Slack
    channel of the same name, is refused."""
    from app.connectors.buttons import value

    chat = Chat(app, "slack", services)
    card = ask_delete(chat, posts)
    with app.app_context():
        approval_id = db.session.scalar(sa.select(Approval.id))
        telegrams = value(approval_id, "confirm", "telegram", card["channel"])
    slack_press(app, chat, slack_interaction("U111", card["channel"], message_id(chat, card), telegrams))
    assert handle_calls["n"] == 0 and told(chat)[-1] == FORGED


@pytest.mark.parametrize("payload", ["[1, 2]", '{"type": "block_actions", "user": "U111", "actions": "x"}', "not json"])
def test_a_signed_but_malformed_slack_interaction_is_acknowledged_and_does_nothing(app, services, payload):
    from urllib.parse import urlencode

    chat = Chat(app, "slack", services)
    assert slack_press(app, chat, urlencode({"payload": payload})).status_code == 200
    assert statuses(app) == []


def test_a_card_in_a_thread_decided_on_the_web_reads_its_outcome_there(app, chat, posts, sign_in, handle_calls):
    """Someone decides the thread's card elsewhere (here: alice on its web page): the thread's
    message loses its buttons and reads the outcome, as a press would have left it."""
    card = ask_delete(chat, posts)
    alice = sign_in("alice@example.com")
    with app.app_context():
        approval_id = db.session.scalar(sa.select(Approval.id))
    _, token = alice.card(alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True))
    assert alice.answer(approval_id, token).status_code == 200
    chat.work()
    outcome = edits(chat)[-1]
    assert (outcome.get("message_id") or outcome.get("ts")) == message_id(chat, card)
    assert "Deleted “Spring meetup”." in outcome["text"] and "reply_markup" not in outcome
    assert handle_calls["n"] == 1


def test_a_card_decided_before_its_thread_message_was_kept_reads_its_outcome_at_once(app, chat, posts, sign_in):
    """The card is decided on the web between its post and the keeping of that post (here: the
    post is kept only afterwards): keeping it shows the outcome there at once."""
    from app.connectors.base import keep_posts

    card = ask_delete(chat, posts)
    with app.app_context():
        approval = db.session.scalar(sa.select(Approval))
        approval_id, kept, approval.posted = approval.id, approval.posted, None
        db.session.commit()
    alice = sign_in("alice@example.com")
    _, token = alice.card(alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True))
    assert alice.answer(approval_id, token).status_code == 200
    chat.work()
    assert edits(chat) == []  # nothing kept yet, nothing to edit
    with app.app_context():
        keep_posts(db.session.get(Approval, approval_id), kept)
    chat.work()
    outcome = edits(chat)[-1]
    assert (outcome.get("message_id") or outcome.get("ts")) == message_id(chat, card)
    assert "Deleted “Spring meetup”." in outcome["text"] and "reply_markup" not in outcome
