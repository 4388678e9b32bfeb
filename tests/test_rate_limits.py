"""Rate limits live in the real Redis (REDIS_URL), shared by every process. They count each client
by its own address (through TRUSTED_PROXIES only), each person by their token or account, and a
stranger's failed sign-ins slow an account down without locking its person out of an address or
a browser (device cookie) they signed in from (tests/adversarial/test_signin_lockout.py)."""

from __future__ import annotations

import re

import pytest
import redis
import sqlalchemy as sa
import time_machine

from app.auth import create_token
from app.extensions import db
from app.models import Message, User
from tests.conftest import REDIS_URL, Browser, api_headers

ALICE_HOME, STRANGER = "198.51.100.7", "203.0.113.9"


@pytest.fixture
def app_config():
    return {"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": REDIS_URL}


def test_failed_sign_ins_block_their_source_address_in_redis(app):
    browser = Browser(app, STRANGER)
    codes = [browser.sign_in(f"nobody{i}@example.com", "wrong").status_code for i in range(10)]
    blocked = browser.sign_in("alice@example.com", "demo")  # even the right password, from this address
    assert codes == [200] * 10
    assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) > 0
    assert "Too many failed sign-ins from your address. Try again in" in blocked.get_data(as_text=True)
    assert redis.Redis.from_url(REDIS_URL).keys("LIMITS*"), "the limiter kept no counter in Redis"
    assert Browser(app, ALICE_HOME).sign_in("alice@example.com", "demo").status_code == 302


def test_successful_sign_ins_do_not_count_against_the_address(app):
    for _ in range(12):
        assert Browser(app, ALICE_HOME).sign_in("alice@example.com", "demo").status_code == 302
    assert Browser(app, ALICE_HOME).sign_in("alice@example.com", "wrong").status_code == 200


def test_a_strangers_many_failures_never_lock_the_person_out_at_home(app):
    with time_machine.travel(1_900_000_000, tick=False):  # the account's wait cannot run out meanwhile
        assert Browser(app, ALICE_HOME).sign_in("alice@example.com", "demo").status_code == 302  # her address
        stranger = Browser(app, STRANGER)
        codes = [stranger.sign_in("alice@example.com", f"guess{i}").status_code for i in range(30)]
        assert 429 in codes and 302 not in codes
        assert Browser(app, "192.0.2.99").sign_in("alice@example.com", "demo").status_code == 429  # a wait is on
        assert Browser(app, ALICE_HOME).sign_in("alice@example.com", "demo").status_code == 302


def test_an_accounts_failures_slow_it_down_doubling_to_a_cap_and_never_block_it(app):
    """A stranger at many addresses (the per-address block never trips) guesses alice's password:
    after SIGNIN_SLOWDOWN_AFTER failures each one doubles the wait, up to SIGNIN_SLOWDOWN_CAP; the
    wait is refused without checking the password; once it passes, the right password works."""
    with time_machine.travel(1_900_000_000, tick=False) as clock:
        waits = []
        for i in range(23):
            response = Browser(app, f"192.0.2.{i + 1}").sign_in("alice@example.com", "guess")
            if response.status_code == 429:
                said = re.search(
                    r"Too many failed sign-ins for this account\. Try again in (\d+) seconds?\.", response.get_data(as_text=True)
                )
                waits.append(int(said.group(1)))
                refused = Browser(app, "192.0.2.200").sign_in("alice@example.com", "demo")
                assert refused.status_code == 429  # a new address waits too, even with the right password
                clock.shift(waits[-1])
        assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
        clock.shift(60)
        assert Browser(app, "192.0.2.201").sign_in("alice@example.com", "demo").status_code == 302


@pytest.mark.parametrize(
    "app_config",
    [
        {"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": REDIS_URL, "SESSION_COOKIE_SECURE": secure}
        for secure in (True, False)
    ],
)
def test_a_sign_in_gives_the_browser_a_device_cookie_for_the_sign_in_page_only(app):
    """Long-lived, HttpOnly, SameSite=Lax, Secure as the session cookie is, and not the session."""
    cookies = Browser(app, ALICE_HOME).sign_in("alice@example.com", "demo").headers.getlist("Set-Cookie")
    (device,) = [c for c in cookies if c.startswith("countersign_device=")]
    attributes = {a.strip().split("=")[0].lower(): a.strip() for a in device.split(";")[1:]}
    assert attributes["path"] == "Path=/login" and attributes["samesite"] == "SameSite=Lax" and "httponly" in attributes
    assert attributes["max-age"] == f"Max-Age={365 * 24 * 3600}"
    assert ("secure" in attributes) is app.config["SESSION_COOKIE_SECURE"]
    assert any(c.startswith("session=") for c in cookies)


def test_an_unknown_email_is_slowed_down_like_a_known_one(app):
    """The slow-down does not say which accounts exist."""
    with time_machine.travel(1_900_000_000, tick=False):

        def codes(email):
            return [Browser(app, f"192.0.2.{i + 1}").sign_in(email, "guess").status_code for i in range(7)]

        assert codes("alice@example.com") == codes("nobody@example.com") == [200] * 5 + [429, 429]


@pytest.mark.parametrize("app_config", [{"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": REDIS_URL, "TRUSTED_PROXIES": 1}])
def test_behind_one_trusted_proxy_each_client_has_its_own_limit(app):
    """Every request comes from the load balancer (10.0.0.1); the client is the address it added."""
    first = Browser(app, "10.0.0.1", {"X-Forwarded-For": "198.51.100.1"})
    assert [first.sign_in(f"n{i}@example.com", "x").status_code for i in range(11)] == [200] * 10 + [429]
    second = Browser(app, "10.0.0.1", {"X-Forwarded-For": "198.51.100.2"})
    assert second.sign_in("alice@example.com", "demo").status_code == 302
    # A client's own X-Forwarded-For comes before the one the balancer adds: it changes nothing.
    spoofed = Browser(app, "10.0.0.1", {"X-Forwarded-For": "192.0.2.99, 198.51.100.1"})
    assert spoofed.sign_in("alice@example.com", "demo").status_code == 429


def test_with_no_trusted_proxy_x_forwarded_for_is_not_believed(app):
    codes = [
        Browser(app, STRANGER, {"X-Forwarded-For": f"192.0.2.{i}"}).sign_in(f"n{i}@example.com", "x").status_code
        for i in range(11)
    ]
    assert codes == [200] * 10 + [429]


def _tokens(app, *names):
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        return [create_token(alice, name=name) for name in names]


def limits(**settings):
    return pytest.mark.parametrize("app_config", [{"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": REDIS_URL, **settings}])


def _say(client, convo, token, address="127.0.0.1"):
    return client.post(
        f"/api/conversations/{convo}/messages",
        json={"text": "/list_posts"},
        headers=api_headers(token),
        environ_base={"REMOTE_ADDR": address},
    )


def _stored(app, convo):
    with app.app_context():
        return len(db.session.scalars(sa.select(Message).where(Message.conversation_id == convo, Message.role == "user")).all())


@limits(RATELIMIT_MESSAGES_PER_PERSON="3 per minute")
def test_api_messages_are_limited_per_token(app):
    one, two = _tokens(app, "one", "two")
    client = app.test_client()
    convo = client.post("/api/conversations", headers=api_headers(one)).get_json()["id"]
    assert [_say(client, convo, one).status_code for _ in range(3)] == [200, 200, 200]
    over = _say(client, convo, one, "192.0.2.5")  # another address: still this token's fourth
    assert over.status_code == 429 and over.get_json()["error"] == "TooManyAttempts"
    assert over.get_json()["message"].startswith("Too many requests (3 per 1 minute). Try again in ")
    assert int(over.headers["Retry-After"]) > 0
    assert _say(client, convo, two).status_code == 200
    assert _stored(app, convo) == 4  # the refused message was not stored


@limits(RATELIMIT_MESSAGES_PER_ADDRESS="4 per minute")
def test_api_messages_are_limited_per_address(app):
    tokens = _tokens(app, "one", "two", "three", "four", "five")
    client = app.test_client()
    convo = client.post("/api/conversations", headers=api_headers(tokens[0])).get_json()["id"]
    assert [_say(client, convo, token).status_code for token in tokens] == [200, 200, 200, 200, 429]
    assert _say(client, convo, tokens[4], "192.0.2.5").status_code == 200


@limits(RATELIMIT_MESSAGES_PER_PERSON="2 per minute")
def test_a_persons_messages_count_once_across_the_browser_and_the_api(app, alice):
    convo = alice.new_conversation()
    assert alice.htmx_post(f"/c/{convo}/messages", text="/list_posts").status_code == 200
    api = alice.client.post(
        f"/api/conversations/{convo}/messages", json={"text": "/list_posts"}, headers={"X-CSRFToken": alice.csrf}
    )
    assert api.status_code == 200
    over = alice.htmx_post(f"/c/{convo}/messages", text="/list_posts")
    assert over.status_code == 429 and "Too many requests (2 per 1 minute)" in over.get_data(as_text=True)


@limits(RATELIMIT_MESSAGES_PER_PERSON="2 per minute")
def test_a_browser_retry_counts_as_one_of_the_persons_messages(app, alice):
    convo = alice.new_conversation()
    assert alice.htmx_post(f"/c/{convo}/messages", text="/list_posts").status_code == 200
    assert alice.htmx_post(f"/c/{convo}/retry").status_code == 200  # nothing failed: runs no turn, still counts
    over = alice.htmx_post(f"/c/{convo}/retry")
    assert over.status_code == 429 and "Too many requests (2 per 1 minute)" in over.get_data(as_text=True)


@limits(RATELIMIT_ANSWERS_PER_PERSON="2 per minute")
def test_api_answers_are_limited_per_token(app):
    (token,) = _tokens(app, "one")
    client = app.test_client()
    codes = [
        client.post(f"/api/approvals/{'0' * 32}/confirm", json={"token": "x"}, headers=api_headers(token)).status_code
        for _ in range(3)
    ]
    assert codes[0] == codes[1] != 429 and codes[2] == 429
