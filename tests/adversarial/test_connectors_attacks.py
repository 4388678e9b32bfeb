"""Chat connectors as an attacker meets them (issue 13, points 3, 4, 14 and Slack markup): a forged
email From: (answering a card, or starting a turn, or drawing a reply to someone who never wrote),
a replayed signed body, someone else in a shared thread, a redelivery after a failed turn, markup
in card text, and edited, bot and channel messages. Real webhooks in, real HTTP and
SMTP out, as tests/test_connectors.py does."""

from __future__ import annotations

import json
import time

import pytest
import sqlalchemy as sa

from app.extensions import db, redis_client
from app.models import Approval, Message, Post, User
from tests.fake_chat import (
    EMAIL_SECRET,
    Chat,
    chat_fixtures,
    counter,
    email_headers,
    queued_jobs,
    slack_headers,
    slack_ts,
)

PROMPT = "Reply 'Yes' to confirm."


services, app_config, chat = chat_fixtures()


@pytest.fixture
def email(app, services):
    return Chat(app, "email", services)


def statuses(app):
    with app.app_context():
        return [a.status for a in db.session.scalars(sa.select(Approval).order_by(Approval.created_at))]


def ask_delete(chat, posts, title="Spring meetup", who="alice"):
    chat.say(f"/delete_post post={posts[title]}", who=who)
    sent = chat.sent()
    # (What else came back, and the cards, when no card was posted: CI once saw nothing at all.)
    assert sent and PROMPT in sent[-1], (sent, statuses(chat.app), [m["To"] for m in chat.smtp.inbox.messages], chat.api.posts)


def card_email(services, to="alice@example.com"):
    """The newest card email the fake SMTP server got for that person."""
    cards = [m for m in services[1].inbox.messages if m["To"] == to and "⚠️" in m.get_payload()]
    return cards[-1]


def answer_card(services, to="alice@example.com"):
    """The threading headers of a reply to that card email, as the person's mail client writes them."""
    card = card_email(services, to)
    return {"in_reply_to": card["Message-ID"], "references": f"{card['References']} {card['Message-ID']}"}


def user_messages(app, text):
    with app.app_context():
        return db.session.scalar(
            sa.select(sa.func.count()).select_from(Message).where(Message.role == "user", Message.text == text)
        )


# --- 1. Email confirms only a reply to the card's own email ----------------------------------------


def test_the_issue_payload_two_forged_emails_run_nothing(app, email, posts, handle_calls, services):
    """A signed body with a forged From: asks, a second answers "yes" in the same thread (whose root
    the forger chose). The card's email went to the real alice; the forger never held its id."""
    forged = {"in_reply_to": "<attacker-root@evil.example>", "references": "<attacker-root@evil.example>"}
    email.say(f"/delete_post post={posts['Spring meetup']}", redeliver="<attacker-root@evil.example>")
    card = card_email(services)
    with app.app_context():
        approval_id = db.session.scalar(sa.select(Approval.id))
    assert card["To"] == "alice@example.com" and approval_id not in card["Message-ID"]  # not derivable from the id
    email.say("yes", **forged)
    assert handle_calls["n"] == 0
    assert statuses(app) == ["pending"]


@pytest.mark.parametrize("reply", ["yes", "no"])
def test_forged_email_without_the_card_id_neither_confirms_nor_declines(app, email, posts, handle_calls, reply, services):
    ask_delete(email, posts)
    root = email.roots["main"]
    email.say(reply, in_reply_to=root, references=root)  # knows the thread, not the card's Message-ID
    email.say(
        reply,
        in_reply_to="<card.00000000000000000000000000000000@countersign.example>",
        references=f"{root} <card.00000000000000000000000000000000@countersign.example>",
    )  # guessed
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    email.say("yes", **answer_card(services))  # alice's own reply to her card's email: still her wait
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]


def test_forged_email_cannot_supersede_the_waiting_card(app, email, posts, handle_calls, services):
    ask_delete(email, posts, "Spring meetup")
    root = email.roots["main"]
    email.say(f"/delete_post post={posts['Launch notes']}", in_reply_to=root, references=root)
    assert email.sent()[-1].startswith("Please answer this in Countersign: https://countersign.example/approvals/")
    assert statuses(app) == ["pending", "pending"]  # the first card was not superseded
    email.say("yes", **answer_card(services))  # alice answers the card email she holds: the first one
    with app.app_context():
        done = db.session.scalar(sa.select(Approval).where(Approval.status == "done"))
        assert done.rows[0]["value"] == "Spring meetup"
    assert handle_calls["n"] == 1


def test_another_persons_card_id_does_not_answer_alices_card(app, email, posts, handle_calls, services):
    ask_delete(email, posts, "Spring meetup")
    with app.app_context():
        bob = db.session.scalar(sa.select(User).where(User.email == "bob@example.com"))
        db.session.add(Post(tenant_id=bob.tenant_id, author_id=bob.id, title="Bob's post", status="draft"))
        db.session.commit()
        bobs = db.session.scalar(sa.select(Post.id).where(Post.title == "Bob's post"))
    email.say(f"/delete_post post={bobs}", who="bob", thread="bob")
    bobs_card = card_email(services, "bob@example.com")["Message-ID"]
    root = email.roots["main"]
    email.say("yes", in_reply_to=bobs_card, references=f"{root} {bobs_card}")  # as alice, with bob's id
    assert handle_calls["n"] == 0 and statuses(app) == ["pending", "pending"]


@pytest.mark.parametrize(
    "verdict",
    [
        {"auth": {"spf": "pass", "dkim": "pass", "dmarc": "fail"}},
        {"auth": {"dkim": "none"}, "authentication_results": None},  # the only verdict: no DKIM, no DMARC
        {"auth": {}},
        {"auth": "pass"},
        {"authentication_results": "mx.example; spf=pass smtp.mailfrom=example.com; dmarc=fail header.from=example.com"},
        {"authentication_results": "mx.example; none"},
    ],
    ids=["dmarc-fail", "dkim-none", "empty", "not-an-object", "header-dmarc-fail", "header-unreadable"],
)
def test_a_failing_provider_verdict_is_never_a_confirm(app, email, posts, handle_calls, verdict, services):
    ask_delete(email, posts)
    email.say("yes", **verdict)  # carries the card's Message-ID, but the provider says the sender is not proven
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    email.say("yes", **answer_card(services))
    assert handle_calls["n"] == 1


def test_a_passing_provider_verdict_with_the_card_id_confirms(app, email, posts, handle_calls):
    ask_delete(email, posts)
    email.say(
        "yes",
        auth={"spf": "pass", "dkim": "pass", "dmarc": "pass"},
        authentication_results="mx.example; spf=pass; dkim=pass header.d=example.com; dmarc=pass",
    )
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]


def test_a_from_header_naming_two_senders_is_ignored(app, email):
    email.say("/list_posts", **{"from": "Alice <alice@example.com>, Bob <bob@example.com>"})
    assert email.sent() == [] and user_messages(app, "/list_posts") == 0


@pytest.mark.parametrize(
    "field, value",
    [("from", {"address": "alice@example.com"}), ("references", ["<a@x>", "<b@x>"]), ("subject", 7), ("text", ["yes"])],
)
def test_an_email_field_that_is_not_text_is_no_mail(app, email, services, field, value):
    """A red-team run sent `from` as an object: it became text, and a reply went to
    "'alice@example.com'}"; a `references` list reached the reply's headers as a Python list."""
    body, _ = email.webhook("/list_posts")
    mail = {**json.loads(body), field: value}
    body = json.dumps(mail)
    assert app.test_client().post(email.url, data=body, headers=email_headers(body)).status_code == 200
    email.work()
    nothing_happened(app, services)


# --- 2. A signed email body acts once: a timestamp inside the signature, dedupe past the window ----


@pytest.mark.parametrize("offset", [-360, 360])  # a margin: the stamp is whole seconds, the check is not
def test_a_signed_email_outside_the_five_minute_window_is_refused(app, email, offset):
    body, _ = email.webhook("/list_posts")
    response = app.test_client().post(email.url, data=body, headers=email_headers(body, int(time.time()) + offset))
    assert response.status_code == 401
    assert user_messages(app, "/list_posts") == 0


def test_an_email_signed_over_the_body_alone_is_refused(app, email):
    import hashlib
    import hmac

    body, _ = email.webhook("/list_posts")
    signature = "sha256=" + hmac.new(EMAIL_SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
    for headers in (
        {"X-Countersign-Signature": signature},
        {"X-Countersign-Signature": signature, "X-Countersign-Timestamp": str(int(time.time()))},
    ):
        assert app.test_client().post(email.url, data=body, headers=headers).status_code == 401


def test_a_replayed_signed_email_acts_once(app, email, posts):
    body, headers = email.webhook(f"/delete_post post={posts['Spring meetup']}")
    for _ in range(3):
        assert app.test_client().post(email.url, data=body, headers=headers).status_code == 200
    email.work()
    assert statuses(app) == ["pending"]


@pytest.mark.parametrize("stamp", ["²", "+1700000000", "0x10", "1e9", "9" * 40])
def test_odd_webhook_timestamps_are_401_not_500(app, email, stamp):
    body = json.dumps({"type": "event_callback"})
    client = app.test_client()
    slack = {**slack_headers(body), "X-Slack-Request-Timestamp": stamp}
    assert client.post("/connectors/slack/events", data=body, headers=slack).status_code == 401
    mail = {**email_headers(body), "X-Countersign-Timestamp": stamp}
    assert client.post(email.url, data=body, headers=mail).status_code == 401


# --- 3. Waits belong to one person ------------------------------------------------------------------


@pytest.fixture
def carols_post(app):
    with app.app_context():
        carol = db.session.scalar(sa.select(User).where(User.email == "carol@example.com"))
        post = Post(tenant_id=carol.tenant_id, author_id=carol.id, title="Globex plans", status="draft")
        db.session.add(post)
        db.session.commit()
        return post.id


def test_another_tenants_person_in_the_thread_cannot_supersede_or_answer(app, chat, posts, carols_post, handle_calls):
    ask_delete(chat, posts, "Spring meetup")
    chat.say(f"/delete_post post={carols_post}", who="carol")  # her own card, in the same thread
    assert PROMPT in chat.sent()[-1]
    assert statuses(app) == ["pending", "pending"]  # alice's card still waits: not superseded
    chat.say("yes", who="carol")
    with app.app_context():
        rows = {a.rows[0]["value"]: a.status for a in db.session.scalars(sa.select(Approval))}
    assert rows == {"Spring meetup": "pending", "Globex plans": "done"}
    chat.say("yes")  # alice's wait was never touched
    assert statuses(app) == ["done", "done"] and handle_calls["n"] == 2


def test_someone_elses_no_in_the_thread_declines_nothing(app, chat, posts, handle_calls):
    ask_delete(chat, posts)
    chat.say("no", who="bob")
    assert statuses(app) == ["pending"]
    chat.say("yes")
    assert handle_calls["n"] == 1


def test_with_redis_down_someone_else_in_the_thread_gets_no_link_to_alices_card(app, services, posts, handle_calls, tmp_path):
    import redis

    from tests.services import REDIS_TIMEOUTS, PrivateRedis

    server = PrivateRedis(tmp_path)
    try:
        app.extensions["redis"] = redis.Redis.from_url(server.url, **REDIS_TIMEOUTS)
        chat = Chat(app, "telegram", services)
        ask_delete(chat, posts)
        server.stop()
        chat.say("yes", who="bob")
        assert chat.sent()[-1] == (
            "Countersign is briefly unavailable, so nothing was done with your message. Please send it again in a moment."
        )  # no card of bob's waits here: sent again, never a link to alice's card
        assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    finally:
        if server.proc and server.proc.poll() is None:
            server.stop()


# --- 4. Seen only once the turn is done; one turn per delivery ---------------------------------------


def fail_once(monkeypatch, name):
    """Make app.copilot.<name> (the front door the connectors call) raise on its first call (the
    database went away mid-turn), then work; returns the call count."""
    from app import copilot

    real, calls = getattr(copilot, name), {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the database went away mid-turn")
        return real(*args, **kwargs)

    monkeypatch.setattr(copilot, name, flaky)
    return calls


def test_a_delivery_whose_turn_raised_is_processed_when_redelivered(app, chat, monkeypatch):
    calls = fail_once(monkeypatch, "send_message")
    redeliver = {"telegram": 880_001, "slack": "EvFLAKY", "email": "<flaky@example.com>"}[chat.name]
    chat.say("/list_posts", redeliver=redeliver)
    assert calls["n"] == 1 and chat.sent() == []  # the turn raised: nothing said, nothing stored
    chat.say("/list_posts", redeliver=redeliver)  # the provider delivers it again
    assert calls["n"] == 2 and user_messages(app, "/list_posts") == 1
    assert "Spring meetup" in chat.sent()[-1]
    chat.say("/list_posts", redeliver=redeliver)  # done now: a third delivery acts once
    assert calls["n"] == 2


def test_two_deliveries_before_any_worker_runs_queue_one_turn(app, chat):
    body, headers = chat.webhook("/list_posts")
    client = app.test_client()
    for _ in range(2):
        assert client.post(chat.url, data=body, headers=headers).status_code == 200
    with app.app_context():
        assert queued_jobs(app) == 1
    chat.work()
    assert user_messages(app, "/list_posts") == 1


def test_a_delivery_whose_hold_ran_out_while_queued_still_runs_once(app, chat):
    body, headers = chat.webhook("/list_posts")
    client = app.test_client()
    client.post(chat.url, data=body, headers=headers)
    with app.app_context():
        redis = redis_client.client
        [key] = redis.keys("seen:*")
        redis.delete(key)  # the lease ran out before a worker picked the job up
    client.post(chat.url, data=body, headers=headers)  # the provider's retry takes a new hold
    with app.app_context():
        assert queued_jobs(app) == 2
    chat.work()
    assert user_messages(app, "/list_posts") == 1


def test_a_yes_whose_answer_raised_reopens_the_wait(app, chat, posts, handle_calls, monkeypatch):
    ask_delete(chat, posts)
    calls = fail_once(monkeypatch, "answer")
    redeliver = {"telegram": 880_101, "slack": "EvYES", "email": "<yes@example.com>"}[chat.name]
    chat.say("yes", redeliver=redeliver)
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    chat.say("yes", redeliver=redeliver)
    assert handle_calls["n"] == 1 and statuses(app) == ["done"] and calls["n"] == 2


# --- 5. Card text is shown literally on every platform ------------------------------------------------

MARKUP = "<!channel> see <http://evil.example|bank.com> & ask <@U999>"


def test_slack_posts_card_rows_outcomes_and_model_text_escaped(app, services, add_post, model, handle_calls):
    from app.copilot.kit import text

    chat = Chat(app, "slack", services)
    post = add_post(MARKUP)
    chat.say(f"/delete_post post={post}")
    model.enqueue(text(f"Done. {MARKUP}"))
    chat.say("yes")
    posted = [p["text"] for p in services[0].posts]  # (the card's own message edited to its outcome too)
    escaped = "&lt;!channel&gt; see &lt;http://evil.example|bank.com&gt; &amp; ask &lt;@U999&gt;"
    card, outcome, said = [p["text"] for p in services[0].posts if p["path"].endswith("/chat.postMessage")][-3:]
    assert f"Post: {escaped}" in card and said == f"Done. {escaped}"
    assert outcome.startswith(f"Deleted “{escaped}”. (Confirmed by you, ")
    assert not any("<" in p or ">" in p for p in posted)
    assert all(p["unfurl_links"] is False for p in services[0].posts if p["path"].endswith("/chat.postMessage"))


def test_telegram_posts_plain_text_without_a_parse_mode(app, services, add_post):
    chat = Chat(app, "telegram", services)
    post = add_post("<b>*bold*</b> [bank](http://evil.example)")
    chat.say(f"/delete_post post={post}")
    [card] = [p for p in services[0].posts if PROMPT in p["text"]]
    assert "parse_mode" not in card and "Post: <b>*bold*</b> [bank](http://evil.example)" in card["text"]


def test_email_posts_plain_text_and_a_broken_subject_line_cannot_add_headers(app, email, posts, services):
    email.say(f"/delete_post post={posts['Spring meetup']}", subject="Cleanup\r\nBcc: eve@evil.example")
    sent = card_email(services)
    assert sent.get_content_type() == "text/plain"
    assert sent["Bcc"] is None and sent["Subject"] == "Re: Cleanup Bcc: eve@evil.example"


# --- 6. Only a person's own new message counts ---------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"subtype": "message_changed", "message": {"user": "U111", "text": "yes"}},
        {"bot_id": "B1"},
        {"subtype": "bot_message"},
        {"user": None},
    ],
    ids=["edited", "bot", "bot-subtype", "no-user"],
)
def test_slack_edits_bots_and_senderless_events_are_not_answers(app, services, posts, handle_calls, extra):
    chat = Chat(app, "slack", services)
    ask_delete(chat, posts)
    chat.say("yes", **extra)
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]


def test_slack_the_same_message_under_another_event_id_acts_once(app, services, posts):
    chat = Chat(app, "slack", services)
    for event_id in ("EvOne", "EvTwo"):  # e.g. a message and its copy for a second installation
        chat.say(f"/delete_post post={posts['Spring meetup']}", redeliver=event_id, ts="1700000001.000200")
    assert statuses(app) == ["pending"]


@pytest.mark.parametrize(
    "change",
    ["edited", "bot", "sender_chat", "forwarded", "forwarded_hidden", "forwarded_legacy", "via_bot", "business_bot", "quoted"],
)
def test_telegram_edits_bots_and_chat_senders_are_not_answers(app, services, posts, handle_calls, change):
    """Only the person's own new words answer: not an edit, a bot, a chat, a forward of someone
    else's "yes", an inline bot's text, a Business bot's, or a "yes" Telegram marks as a quote."""
    chat = Chat(app, "telegram", services)
    ask_delete(chat, posts)
    extra = {
        "bot": {"from": {"id": 111, "is_bot": True, "first_name": "relay"}},
        "sender_chat": {"sender_chat": {"id": -1001, "type": "supergroup"}},
        "forwarded": {"forward_origin": {"type": "user", "date": 1, "sender_user": {"id": 222, "is_bot": False}}},
        "forwarded_hidden": {"forward_origin": {"type": "hidden_user", "date": 1, "sender_user_name": "x"}},
        "forwarded_legacy": {"forward_date": 1, "forward_sender_name": "x"},
        "via_bot": {"via_bot": {"id": 999, "is_bot": True, "first_name": "inline"}},
        "business_bot": {"sender_business_bot": {"id": 998, "is_bot": True, "first_name": "assistant"}},
        "quoted": {"entities": [{"type": "blockquote", "offset": 0, "length": 3}]},
    }.get(change, {})
    body, headers = chat.webhook("yes", **extra)
    if change == "edited":
        update = json.loads(body)
        update["edited_message"] = update.pop("message")  # alice edits an old message to "yes"
        body = json.dumps(update)
    assert app.test_client().post(chat.url, data=body, headers=headers).status_code == 200
    chat.work()
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]


@pytest.mark.parametrize("name", ["slack", "telegram"])
def test_a_yes_written_before_its_card_was_posted_does_not_answer_it(app, services, posts, handle_calls, name):
    """A "yes" the person wrote before the card reached the thread (a second "yes" to the card
    before it, delivered after the next card went out) never confirms a card she had not seen:
    only her message written after the card's own post answers it. The early one is a message of
    the conversation, which replaces no waiting card."""
    chat = Chat(app, name, services)
    written = slack_ts() if name == "slack" else next(counter)  # where a message written now stands
    ask_delete(chat, posts)
    chat.say("yes", **{"ts" if name == "slack" else "message_id": written})
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    assert user_messages(app, "yes") == 1  # (kept, as a message of the conversation)
    chat.say("yes")
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]


@pytest.mark.parametrize(
    "ts", ["Infinity", "NaN", "1e99", "9" * 30, "", "1700000000", "９９９９９９９９９９.000001", "٩٩٩٩٩٩٩٩٩٩.1"]
)
def test_a_slack_yes_whose_place_cannot_be_read_does_not_answer(app, services, posts, handle_calls, ts):
    """Slack's ts is digits, a dot and digits; a message whose ts is anything else (which no
    number compares after the card's) proves nothing."""
    chat = Chat(app, "slack", services)
    ask_delete(chat, posts)
    chat.say("yes", ts=ts)
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]


def test_her_yes_answers_a_card_pushed_elsewhere_at_the_same_moment(app, services, posts, handle_calls, monkeypatch):
    """Where a card went is kept by each job that sent it: the thread's post and a push to her
    linked Telegram (which takes all her cards) run at once on two workers. Each keeps its own
    post: the thread's is not lost, so her "yes" there, after the card, still answers it."""
    from app import copilot
    from app.connectors import post_turn
    from app.connectors.telegram import Telegram
    from app.models import ConnectorIdentity
    from app.status import CardsTo

    slack, _ = Chat(app, "slack", services), Chat(app, "telegram", services)  # alice's U111 and 111
    with app.app_context():
        for identity in db.session.scalars(sa.select(ConnectorIdentity).where(ConnectorIdentity.external_id == "111")):
            identity.cards = CardsTo.ALL
        db.session.commit()
    held, call, prompt = [], copilot.call, Telegram.post_prompt

    def hold_the_threads_post(target, *args):
        return held.append(args) if target == "app.connectors:post_turn" else call(target, *args)

    def push_while_the_thread_posts(self, *args):
        answer = prompt(self, *args)
        while held:  # meanwhile, another worker posts the card in her Slack thread
            with app.app_context():
                post_turn(*held.pop())
        return answer

    monkeypatch.setattr(copilot, "call", hold_the_threads_post)
    monkeypatch.setattr(Telegram, "post_prompt", push_while_the_thread_posts)
    ask_delete(slack, posts)
    with app.app_context():
        posted = db.session.scalar(sa.select(Approval.posted))
    assert sorted(p["connector"] for p in posted) == ["slack", "telegram"], posted
    slack.say("yes")
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]


def test_a_card_whose_message_the_service_did_not_number_opens_no_wait(app, services, posts, handle_calls, monkeypatch):
    """A card the service took without saying which message it is (no message_id) can be shown to
    precede no reply: its link goes to the thread and no wait opens, so her next words are her
    words, and the card waits for its buttons or the web."""
    from app.connectors.telegram import Telegram

    send = Telegram._send
    monkeypatch.setattr(Telegram, "_send", lambda self, p: {"ok": True, "result": {}} if "reply_markup" in p else send(self, p))
    chat = Chat(app, "telegram", services)
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    assert chat.sent()[-1].startswith("Please answer this in Countersign: ")
    with app.app_context():
        assert redis_client.client.keys("awaiting_confirm:*") == []
    assert statuses(app) == ["pending"]


def test_a_telegram_answer_of_ok_false_opens_no_wait(app, services, posts, handle_calls, monkeypatch):
    """Telegram refuses with HTTP 4xx (tested with a card past 4096 characters); an answer of
    "ok": false with a 200 (a proxy's, or Telegram's own one day) is a refusal too, even one that
    names a message: the card opens no wait, and its link goes to the thread instead."""
    from app.connectors import telegram

    post_json = telegram.post_json

    def refuse_cards(url, payload, **kw):
        refused = {"ok": False, "description": "Bad Request", "result": {"message_id": 10**9}}
        return refused if "reply_markup" in payload else post_json(url, payload, **kw)

    monkeypatch.setattr(telegram, "post_json", refuse_cards)
    chat = Chat(app, "telegram", services)
    chat.say(f"/delete_post post={posts['Spring meetup']}")
    assert chat.sent()[-1].startswith("Please answer this in Countersign: ")
    with app.app_context():
        assert redis_client.client.keys("awaiting_confirm:*") == []
    chat.say("yes")
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]


@pytest.mark.parametrize("message_id", ["999999999", True, -5, 1e18, "١٢٣٤٥٦٧٨٩٠١٢"])
def test_a_telegram_yes_whose_place_cannot_be_read_does_not_answer(app, services, posts, handle_calls, message_id):
    """Telegram's message_id is a whole number; a message whose id is anything else proves nothing."""
    chat = Chat(app, "telegram", services)
    ask_delete(chat, posts)
    chat.say("yes", message_id=message_id)
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]


@pytest.mark.parametrize("kind", ["blockquote", "expandable_blockquote"])
def test_telegram_a_quoted_yes_above_a_no_declines(app, services, posts, handle_calls, kind):
    """Telegram marks a quote with an entity, not with ">": the first line of the person's own
    words decides, as in email and Slack."""
    chat = Chat(app, "telegram", services)
    ask_delete(chat, posts)
    body, headers = chat.webhook("yes\nno", entities=[{"type": kind, "offset": 0, "length": 3}])
    assert app.test_client().post(chat.url, data=body, headers=headers).status_code == 200
    chat.work()
    assert handle_calls["n"] == 0 and statuses(app) == ["declined"]


# --- 7. An email whose sender the provider did not prove is from nobody ---------------------------------
# (follow-up on point 3) A forged From: that answers no card used to start a turn as the person (READ
# and WRITE actions ran; the answers went to the real person), and replies to unknown senders went
# to whatever From: said (backscatter). Now such mail runs nothing, answers nothing, mails nobody.

CANARY = "/list_posts canary-words-7f3a"
FOREIGN = (
    "mx.countersign.example; spf=pass smtp.mailfrom=eve@evil.example; dkim=pass header.d=evil.example; "
    "dmarc=pass header.from=evil.example"
)  # all true, for the forger's own domain


def refusals(app):
    """The audit rows of refused senders: (tenant, user, detail, channel)."""
    from app.models import AuditEvent

    with app.app_context():
        rows = db.session.scalars(
            sa.select(AuditEvent).where(AuditEvent.event == "connector.refused", AuditEvent.outcome == "unauthenticated_sender")
        )
        return [(r.tenant_id, r.user_id, r.detail, r.channel) for r in rows]


def tenant_of(app, address):
    with app.app_context():
        return db.session.scalar(sa.select(User.tenant_id).where(User.email == address))


def nothing_happened(app, services, mails_before=0):
    """No turn (no conversation, no message), and no mail to anyone."""
    from app.models import Conversation

    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Conversation)) == 0
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Message)) == 0
    assert len(services[1].inbox.messages) == mails_before


FAILING = {
    "dmarc-fail": {"authentication_results": "mx; spf=pass smtp.mailfrom=alice@example.com; dmarc=fail header.from=example.com"},
    "spf-softfail": {"authentication_results": "mx; spf=softfail smtp.mailfrom=alice@example.com"},
    "dkim-none-object": {"auth": {"dkim": "none"}, "authentication_results": None},
    "object-dmarc-fail": {"auth": {"spf": "pass", "dkim": "pass", "dmarc": "fail"}},
    "unreadable": {"authentication_results": "mx.example; none"},
    "not-text": {"authentication_results": {"dmarc": "pass"}},
}


@pytest.mark.parametrize("require_auth", [True, False], ids=["default", "opted-out"])
@pytest.mark.parametrize("verdict", FAILING.values(), ids=FAILING.keys())
def test_a_forged_from_with_a_failing_verdict_runs_no_turn_and_mails_no_one(app, email, services, verdict, require_auth):
    app.config["EMAIL_REQUIRE_AUTH"] = require_auth
    response = email.say(CANARY, **verdict)  # say() asserts the webhook answered 200: no retry
    assert response.status_code == 200
    nothing_happened(app, services)
    [(tenant, user, detail, channel)] = refusals(app)
    assert (tenant, user, channel) == (tenant_of(app, "alice@example.com"), None, "email")
    assert detail.startswith("from alice@example.com: ") and "canary" not in detail


@pytest.mark.parametrize(
    "action", ["/list_posts", "/draft_post title=Forged body=x", "/publish_post post={draft}", "/manage_files operation=list"]
)
def test_a_missing_verdict_runs_nothing_by_default(app, email, services, posts, action):
    email.say(action.format(draft=posts["Spring meetup"]), authentication_results=None)
    nothing_happened(app, services)
    assert [detail for _, _, detail, _ in refusals(app)] == ["from alice@example.com: no authentication verdict"]
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]).status == "draft"


def test_a_missing_verdict_with_email_require_auth_off_is_an_ordinary_message(app, email, services, posts, handle_calls):
    app.config["EMAIL_REQUIRE_AUTH"] = False  # a provider that gives no verdict, knowingly
    email.say("/list_posts", authentication_results=None)
    assert user_messages(app, "/list_posts") == 1 and "Spring meetup" in email.sent()[-1]
    email.say(f"/delete_post post={posts['Spring meetup']}", authentication_results=None)
    email.say("yes", authentication_results=None, **answer_card(services))  # the card's Message-ID: its proof
    assert handle_calls["n"] == 1 and refusals(app) == []


@pytest.mark.parametrize(
    "results",
    [
        FOREIGN,
        "mx; spf=pass smtp.mailfrom=eve@evil.example; dkim=pass header.d=evil.example",
        "mx; dkim=pass header.d=example.com.evil.example",
        "mx; dkim=pass header.d=ample.com; spf=pass smtp.mailfrom=x@ample.com",
        "mx; dkim=pass header.i=@evil.example",
        "mx; spf=pass smtp.mailfrom=<>",
        "mx; dmarc=pass (header.from=example.com) header.from=evil.example",
        'mx; spf=pass smtp.mailfrom="x;dmarc=pass header.from=example.com"@evil.example',
        'mx; spf=pass smtp.mailfrom="x@evil.example; dmarc=fail header.from=example.com',
        "mx; dkim=pass header.d=example.com (; dmarc=fail header.from=example.com",
        "mx; dkim=pass header.d=example.com (a (nested) comment); dmarc=fail header.from=example.com",
        ["mx; dmarc=pass header.from=evil.example", "mx2; dkim=pass header.d=example.com"],
        # The provider's comments quote the envelope sender, which the forger chooses:
        'mx; dmarc=pass header.from=evil.example (envelope "x header.from=example.com "@evil.example)',
        "mx; dmarc=pass header.from=evil.example (envelope (x) header.from=example.com )",
    ],
    ids=[
        "dmarc-for-evil",
        "spf-dkim-for-evil",
        "suffix-trick",
        "tail-of-the-name",
        "dkim-i-for-evil",
        "null-sender",
        "comment-names-alice",
        "quoted-semicolon",
        "open-quote-hides-a-fail",
        "open-comment-hides-a-fail",
        "nested-comment",
        "list-with-dmarc-for-evil",
        "forger-text-in-a-comment",
        "forger-text-in-a-nested-comment",
    ],
)
def test_a_pass_for_another_domain_does_not_prove_alice(app, email, services, posts, handle_calls, results):
    ask_delete(email, posts)
    sent = len(services[1].inbox.messages)
    email.say("yes", authentication_results=results, **answer_card(services))  # even holding the card's id
    email.say(CANARY, authentication_results=results)
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    assert len(services[1].inbox.messages) == sent and user_messages(app, CANARY) == 0
    assert len(refusals(app)) == 2
    email.say("yes", **answer_card(services))  # alice's own reply, her provider's verdict passing: still her card
    assert handle_calls["n"] == 1


@pytest.mark.parametrize(
    "results",
    [
        "mx; dmarc=pass header.from=EXAMPLE.com.",
        "mx; dmarc=pass",  # no domain named: the provider's word for this message's From
        "mx; spf=fail smtp.mailfrom=list@lists.example; dkim=pass header.d=example.com; dmarc=pass header.from=example.com",
        "mx; dkim=pass header.d=evil.example; dkim=pass header.d=example.com",  # an ESP's signature and alice's
        'mx (the provider\'s own note); spf=pass (sender IP is 192.0.2.1) smtp.mailfrom="alice@example.com"',
    ],
    ids=[
        "case-and-dot",
        "dmarc-without-domain",
        "forwarded-dmarc-decides",
        "second-signature-aligned",
        "spf-quoted-with-comments",
    ],
)
def test_a_pass_for_alices_domain_proves_her(app, email, posts, handle_calls, results):
    email.say(f"/delete_post post={posts['Spring meetup']}", authentication_results=results)
    email.say("yes", authentication_results=results)
    assert handle_calls["n"] == 1 and refusals(app) == []


@pytest.mark.parametrize(
    ("results", "sender_domain", "proven"),
    [
        ("mx; dkim=pass header.d=example.com", "mail.example.com", True),  # the parent's DNS holds its subdomains
        ("mx; dkim=pass header.d=mail.example.com", "example.com", False),  # a subdomain does not vouch for its parent
        ("mx; spf=pass smtp.mailfrom=bounce@example.com", "mail.example.com", True),
        ("mx; dmarc=pass header.from=example.com", "mail.example.com", False),  # DMARC names the From's own domain
    ],
)
def test_a_verdict_vouches_for_its_domain_and_the_domains_under_it(results, sender_domain, proven):
    from app.connectors.email import judge, verdicts

    assert (judge(verdicts({"authentication_results": results}), sender_domain) == "") is proven


@pytest.mark.parametrize(
    ("results", "sender_domain", "proven"),
    [
        ("mx; dkim=pass header.d=com", "example.com", False),
        ("mx; spf=pass smtp.mailfrom=bounce@com", "example.com", False),
        ("mx; dkim=pass header.d=co.uk", "example.co.uk", False),
        ("mx; spf=pass smtp.helo=co.uk", "example.co.uk", False),
        ("mx; dkim=pass header.d=github.io", "alice.github.io", False),  # the list's private part: anyone's subdomain
        ("mx; dkim=pass header.d=COM.", "example.com", False),
        ("mx; dkim=pass header.d=com; dkim=pass header.d=evil.example", "example.com", False),
        ("mx; dkim=pass header.d=example.com", "example.com", True),
        ("mx; spf=pass smtp.mailfrom=bounce@example.com", "example.com", True),
        ("mx; dkim=pass header.d=example.co.uk", "mail.example.co.uk", True),
    ],
)
def test_a_dkim_or_spf_pass_must_name_a_registrable_domain(results, sender_domain, proven):
    """A public suffix is nobody's domain: a pass that names one vouches for no sender under it."""
    from app.connectors.email import judge, verdicts

    assert (judge(verdicts({"authentication_results": results}), sender_domain) == "") is proven


def test_a_pass_for_a_public_suffix_does_not_prove_alice(app, email, services, posts, handle_calls):
    email.say(f"/delete_post post={posts['Spring meetup']}", authentication_results="mx; dkim=pass header.d=com")
    assert handle_calls["n"] == 0 and statuses(app) == [] and len(refusals(app)) == 1


def test_the_public_suffix_list_loads_offline():
    """The list ships in the package (no download at runtime; the tests' sockets reach loopback only)."""
    from app.connectors.email import registrable

    assert (registrable("com"), registrable("co.uk"), registrable("example.co.uk")) == (False, False, True)


# --- 8. No backscatter: only a proven sender is ever mailed back --------------------------------------


@pytest.mark.parametrize(
    "verdict",
    [{"authentication_results": None}, {"authentication_results": FOREIGN}, FAILING["dmarc-fail"]],
    ids=["no-verdict", "for-evil", "failing"],
)
def test_an_unknown_unproven_sender_gets_no_reply(app, email, services, verdict):
    email.say("/list_posts", **{"from": "Victim <victim@example.org>", **verdict})
    nothing_happened(app, services)
    [(tenant, _, detail, _)] = refusals(app)
    assert tenant is None and detail.startswith("from victim@example.org: ")


def test_an_unknown_sender_is_told_only_when_proven(app, email, services):
    from tests.fake_chat import passing_verdict

    email.say("/list_posts", **{"from": "Stranger <stranger@example.org>", **passing_verdict("stranger@example.org")})
    [told] = services[1].inbox.messages
    assert told["To"] == "stranger@example.org" and "I don't know who you are" in told.get_payload()
    app.config["EMAIL_REQUIRE_AUTH"] = False  # opted out: a sender without a verdict counts as proven
    email.say("/list_posts", thread="other", authentication_results=None, **{"from": "other@example.org"})
    assert [m["To"] for m in services[1].inbox.messages] == ["stranger@example.org", "other@example.org"]


@pytest.mark.parametrize("verdict", [{"authentication_results": None}, FAILING["dmarc-fail"]], ids=["no-verdict", "failing"])
def test_with_redis_down_an_unproven_sender_gets_no_retry_mail(app, services, posts, verdict, tmp_path):
    import redis

    from tests.services import REDIS_TIMEOUTS, PrivateRedis

    server = PrivateRedis(tmp_path)
    try:
        app.extensions["redis"] = redis.Redis.from_url(server.url, **REDIS_TIMEOUTS)
        email = Chat(app, "email", services)
        server.stop()
        email.say(CANARY, **verdict)
        nothing_happened(app, services)
        assert len(refusals(app)) == 1  # recorded all the same
        email.say(CANARY, redeliver="<proven@example.com>")  # alice's own mail is told to retry
        assert services[1].inbox.messages[-1]["To"] == "alice@example.com"
        assert "send it again in a moment" in services[1].inbox.messages[-1].get_payload()
    finally:
        if server.proc and server.proc.poll() is None:
            server.stop()


def test_a_refused_email_redelivered_after_its_hold_ran_out_is_recorded_once(app, email):
    body, headers = email.webhook(CANARY, authentication_results=None)
    client = app.test_client()
    assert client.post(email.url, data=body, headers=headers).status_code == 200
    with app.app_context():
        redis_client.client.delete(*redis_client.client.keys("seen:*"))  # the lease ran out while queued
    assert client.post(email.url, data=body, headers=headers).status_code == 200
    email.work()  # two jobs for one delivery
    assert len(refusals(app)) == 1


def test_an_email_job_queued_before_senders_were_checked_runs_nothing(app, email, services):
    from dataclasses import asdict

    from app.connectors import process
    from app.connectors.email import parse

    with app.app_context():
        job = asdict(parse(json.loads(email.webhook("/list_posts")[0])))
        del job["unproven"]  # what a process from before this release put on the queue
        assert process(job) == "refused: unproven sender"
    nothing_happened(app, services)


# --- 9. Whatever the provider writes, a failing DMARC verdict is never outvoted -------------------------


def test_no_text_before_a_failing_dmarc_verdict_makes_it_a_pass():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from app.connectors.email import judge, verdicts

    pieces = st.sampled_from(
        [
            "; ",
            "dmarc=pass ",
            "dkim=pass ",
            "header.from=example.com ",
            "header.d=example.com ",
            '"',
            "(",
            ")",
            "\\",
            "spf=pass ",
            "smtp.mailfrom=alice@example.com ",
            "mx ",
        ]
    )
    prefix = st.lists(pieces | st.text(max_size=8), max_size=12).map("".join)

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])  # speed is no defect
    @given(prefix=prefix, as_list=st.booleans())
    def check(prefix, as_list):
        tail = "mx; dmarc=fail header.from=example.com"
        results = [prefix, tail] if as_list else f"{prefix}; {tail[4:]}"
        found = verdicts({"authentication_results": results})
        assert found is not None and judge(found, "example.com") != ""

    check()


def test_any_verdict_shape_is_judged_without_error(app):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from app.connectors.email import sender_problem

    value = st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=8,
    )
    auth = st.fixed_dictionaries({}, optional={"spf": value, "dkim": value, "dmarc": value}) | value

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])  # speed is no defect
    @given(auth=auth, results=value | st.text(max_size=200))
    def check(auth, results):
        problem = sender_problem({"auth": auth, "authentication_results": results}, "alice@example.com")
        assert isinstance(problem, str)
        if auth is None and results is None:
            assert problem == "no authentication verdict"

    with app.app_context():
        check()


# --- 10. A pass that names no domain vouches for nothing (red team F2) ---------------------------------
# The "auth" form names no domain, and its SPF/DKIM passes counted as aligned: a forger sending from
# their own domain, honestly reported as spf/dkim=pass, ran turns and confirmed cards as alice. Only
# DMARC is about the From by definition; and each form the provider gives must prove the sender alone.

HONEST_EVIL = "mx.provider.example; spf=pass smtp.mailfrom=x@evil.example; dkim=pass header.d=evil.example"
NAMELESS = {
    # The red team's payloads, exactly: the dict alone, and beside the honest header for evil.example.
    "dict-spf": {"auth": {"spf": "pass"}, "authentication_results": None},
    "dict-dkim": {"auth": {"dkim": "pass"}, "authentication_results": None},
    "dict-spf-dkim": {"auth": {"spf": "pass", "dkim": "pass"}, "authentication_results": None},
    "dict-spf-beside-evil": {"auth": {"spf": "pass"}, "authentication_results": HONEST_EVIL},
    "dict-dkim-beside-evil": {"auth": {"dkim": "pass"}, "authentication_results": HONEST_EVIL},
    "dict-spf-dkim-beside-evil": {"auth": {"spf": "pass", "dkim": "pass"}, "authentication_results": HONEST_EVIL},
    # Variants: the header form naming no domain, or a property that is not the identity.
    "dict-uppercase": {"auth": {"spf": " PASS ", "dkim": "Pass"}, "authentication_results": None},
    "header-spf": {"authentication_results": "mx; spf=pass"},
    "header-dkim": {"authentication_results": "mx; dkim=pass"},
    "header-spf-dkim": {"authentication_results": "mx; spf=pass; dkim=pass"},
    "header-empty-d": {"authentication_results": "mx; dkim=pass header.d="},
    "header-not-the-identity": {"authentication_results": "mx; dkim=pass header.b=alice@example.com"},
    "header-nameless-beside-evil": {"authentication_results": f"mx; spf=pass; {HONEST_EVIL}"},
    # The two forms disagree: a DMARC pass in one does not cover for the other's pass for evil.example.
    "dict-dmarc-beside-evil": {"auth": {"dmarc": "pass"}, "authentication_results": HONEST_EVIL},
    "header-dmarc-beside-dict-dmarc-fail": {
        "auth": {"dmarc": "fail"},
        "authentication_results": "mx; dmarc=pass header.from=example.com",
    },
    "dict-all-pass-beside-evil": {
        "auth": {"spf": "pass", "dkim": "pass", "dmarc": "pass"},
        "authentication_results": HONEST_EVIL,
    },
}


@pytest.mark.parametrize("verdict", NAMELESS.values(), ids=NAMELESS.keys())
def test_a_pass_naming_no_domain_runs_no_turn(app, email, services, posts, verdict):
    email.say(f"/publish_post post={posts['Spring meetup']}", **verdict)  # the red team's turn: WRITE, no card
    nothing_happened(app, services)
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]).status == "draft"
    [(tenant, user, detail, channel)] = refusals(app)
    assert (tenant, user, channel) == (tenant_of(app, "alice@example.com"), None, "email")
    assert detail.startswith("from alice@example.com: ")


@pytest.mark.parametrize("verdict", NAMELESS.values(), ids=NAMELESS.keys())
def test_a_pass_naming_no_domain_does_not_confirm_the_card(app, email, services, posts, handle_calls, verdict):
    ask_delete(email, posts)
    sent = len(services[1].inbox.messages)
    email.say("yes", **verdict, **answer_card(services))  # holding the card's own Message-ID
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]
    assert len(services[1].inbox.messages) == sent and len(refusals(app)) == 1
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is not None
    email.say("yes", **answer_card(services))  # alice's own reply, her provider's verdict passing
    assert handle_calls["n"] == 1 and statuses(app) == ["done"]


@pytest.mark.parametrize(
    "verdict",
    [
        {"auth": {"dmarc": "pass"}, "authentication_results": None},
        {"auth": {"spf": "fail", "dkim": "pass", "dmarc": "pass"}, "authentication_results": None},  # forwarded
        {"auth": {"spf": "pass", "dkim": "pass", "dmarc": "pass"}},  # beside the fake's passing header for alice
        {"authentication_results": "mx; dmarc=pass"},
    ],
    ids=["dict-dmarc", "dict-forwarded", "dict-beside-alices-header", "header-dmarc-nameless"],
)
def test_a_dmarc_pass_naming_no_domain_still_proves_alice(app, email, posts, handle_calls, verdict):
    email.say(f"/delete_post post={posts['Spring meetup']}", **verdict)
    email.say("yes", **verdict)
    assert handle_calls["n"] == 1 and statuses(app) == ["done"] and refusals(app) == []


@pytest.mark.parametrize(
    ("mail", "problem"),
    [
        ({"auth": {"spf": "pass", "dkim": "pass"}}, "no passing verdict for example.com"),
        ({"auth": {"dmarc": "pass"}, "authentication_results": HONEST_EVIL}, "no passing verdict for example.com"),
        (
            {"auth": {"spf": "pass"}, "authentication_results": "mx; dmarc=pass header.from=example.com"},
            "no passing verdict for example.com",
        ),  # the dict proves nothing: beside a good header, still nothing
        ({"auth": {"dmarc": "none"}, "authentication_results": "mx; dmarc=pass header.from=example.com"}, "dmarc=none"),
        ({"auth": {"dmarc": "pass"}, "authentication_results": "mx; dmarc=fail header.from=example.com"}, "dmarc=fail"),
        ({"auth": {"dmarc": "pass"}, "authentication_results": "mx; dmarc=pass header.from=example.com"}, ""),
        ({"authentication_results": "mx; spf=pass smtp.mailfrom=alice@example.com"}, ""),
    ],
    ids=[
        "dict-without-dmarc",
        "dict-dmarc-header-evil",
        "dict-nameless-header-good",
        "dict-dmarc-none",
        "header-dmarc-fail",
        "both-prove",
        "header-spf-aligned",
    ],
)
def test_each_form_the_provider_gives_must_prove_the_sender_on_its_own(app, mail, problem):
    from app.connectors.email import sender_problem

    with app.app_context():
        assert sender_problem(mail, "alice@example.com") == problem


# --- Slack's own limits: a card too long for a section, a card Slack refuses --------------------------


def test_a_slack_card_longer_than_a_section_is_posted_whole_in_sections_and_answered(app, services, model):
    """A section's text is 3000 characters at most, and Slack refuses the whole message past it
    (HTTP 200, "ok": false). A card whose email runs longer (the model writes the body) was
    refused, unseen, while its "yes" wait opened: a blind "yes" sent it (a security review's find).
    It now goes out in sections, every word of it, verbatim (no link or mention made of them)."""
    from app.copilot.kit import tool_call

    slack = Chat(app, "slack", services)
    body = ("A line of the email. " * 40 + "\n") * 5 + "P.S. also wire the money to account 666."
    model.enqueue(tool_call("send_email", to="dana@example.org", subject="Hi", body=body))
    slack.say("email dana")
    [card] = [p for p in services[0].posts if p.get("blocks")]
    sections = [b["text"] for b in card["blocks"] if b["type"] == "section"]
    assert len(sections) > 1 and all(len(s["text"]) <= 3000 and s["verbatim"] is True for s in sections), sections
    assert "account 666" in sections[-1]["text"] and sum(s["text"].count("A line of the email.") for s in sections) == 200
    slack.say("yes")
    assert statuses(app) == ["done"]


def test_a_card_slack_refuses_opens_no_wait_and_the_thread_gets_its_link(app, services, posts, handle_calls):
    slack = Chat(app, "slack", services)
    services[0].refuse = "channel_not_found"
    try:
        slack.say(f"/delete_post post={posts['Spring meetup']}")
    finally:
        services[0].refuse = None
    assert slack.sent()[-1].startswith("Please answer this in Countersign: https://countersign.example/approvals/")
    slack.say("yes")  # no wait: a conversation turn, never this card's answer
    assert handle_calls["n"] == 0 and statuses(app) == ["pending"]


def test_a_telegram_card_too_long_to_send_opens_no_wait_and_the_thread_gets_its_link(app, services, model):
    """Telegram refuses a message over 4096 characters (HTTP 400): the card is not in the chat, so
    no "yes" there may answer it; its link goes instead, and a "yes" confirms nothing."""
    from app.copilot.kit import tool_call

    telegram = Chat(app, "telegram", services)
    model.enqueue(tool_call("send_email", to="dana@example.org", subject="Hi", body="A line of the email. " * 300))
    telegram.say("email dana")
    assert telegram.sent()[-1].startswith("Please answer this in Countersign: https://countersign.example/approvals/")
    telegram.say("yes")
    assert statuses(app) == ["pending"]


def test_a_slack_card_is_cut_into_sections_that_each_fit_and_together_say_it_all():
    """Cut after the text is shown once (a cut between an emoji and what completes it showed that
    again: 3007 characters, refused), and never into more sections than a message takes."""
    from app.connectors.slack import SECTION_MAX, SECTIONS_MAX, SlackRefused, _sections, escape

    for text in ("x" * 2998 + "1\ufe0f\u20e3" + "y" * 100, "x" * 2999 + "👩\u200d💻" + "y" * 10, ("a&b<c>\u202e\n" * 900)):
        pieces = [s["text"]["text"] for s in _sections(text)]
        assert all(len(p) <= SECTION_MAX for p in pieces) and "".join(pieces) == escape(text), [len(p) for p in pieces]
    with pytest.raises(SlackRefused):
        _sections("&" * (SECTION_MAX // 5 * (SECTIONS_MAX + 1)))
