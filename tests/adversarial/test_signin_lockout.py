"""A stranger cannot keep a person from signing in on a device they have signed in on: failures
from rotating addresses hold the account's wait at SIGNIN_SLOWDOWN_CAP, yet a browser holding the
account's device cookie signs in from any address. The cookie is per account, signed under its
own salt, spent by the sign-in it makes, and exempts at most DEVICE_TRIES attempts."""

from __future__ import annotations

import re

import pytest
from itsdangerous import URLSafeTimedSerializer

from app.auth import signin
from app.copilot.approvals._tokens import TOKEN_SALT
from tests.conftest import REDIS_URL, Browser

BOB, ALICE = "bob@example.com", "alice@example.com"
BOB_HOME, ALICE_HOME, CAFE = "198.51.100.20", "198.51.100.7", "198.51.100.77"
ACCOUNT_WAIT = re.compile(r"Too many failed sign-ins for this account\. Try again in (\d+) seconds?\.")


@pytest.fixture
def app_config():
    return {"RATELIMIT_ENABLED": True, "RATELIMIT_STORAGE_URI": REDIS_URL}


@pytest.fixture
def clock():
    import time_machine

    with time_machine.travel(1_900_000_000, tick=False) as traveller:
        yield traveller


def device_cookie(app, email, address):
    """Sign in at this address and return the device cookie the browser was given."""
    browser = Browser(app, address)
    assert browser.sign_in(email, "demo").status_code == 302
    return browser.client.get_cookie(signin.DEVICE_COOKIE, path="/login").value


def at(app, address, cookie=None):
    """A browser at a new address, holding this device cookie if given."""
    browser = Browser(app, address)
    if cookie is not None:
        browser.client.set_cookie(signin.DEVICE_COOKIE, cookie, path="/login")
    return browser


def hold_at_cap(app, clock, email=BOB):
    """The red team's stranger: from a new address each time, fail the account's sign-in, waiting
    out each "Try again in N s", until the wait reaches the cap (and one failure a minute keeps it)."""
    cap = app.config["SIGNIN_SLOWDOWN_CAP"]
    for i in range(40):
        page = at(app, f"192.0.2.{i + 1}").sign_in(email, f"guess{i}")
        said = ACCOUNT_WAIT.search(page.get_data(as_text=True))
        if said and int(said.group(1)) == cap:
            return
        if said:
            clock.shift(int(said.group(1)))
    raise AssertionError("the account's wait never reached the cap")


def test_bob_signs_in_from_a_new_address_with_his_device_cookie_while_a_stranger_holds_the_cap(app, clock):
    cookie = device_cookie(app, BOB, BOB_HOME)
    hold_at_cap(app, clock)
    laptop = at(app, CAFE, cookie)
    signed_in = laptop.sign_in(BOB, "demo")
    assert signed_in.status_code == 302 and signed_in.headers["Location"] == "/"
    assert laptop.client.get("/").status_code == 200
    assert laptop.client.get_cookie(signin.DEVICE_COOKIE, path="/login").value != cookie  # renewed


def test_without_a_device_cookie_a_new_address_still_waits_out_the_cap(app, clock):
    """What remains, as documented: a brand-new device at a brand-new address waits, even with the
    right password (the password is not even checked), racing the stranger for each free slot."""
    device_cookie(app, BOB, BOB_HOME)
    hold_at_cap(app, clock)
    refused = at(app, CAFE).sign_in(BOB, "demo")
    assert refused.status_code == 429 and "Try again in 60 seconds." in refused.get_data(as_text=True)
    clock.shift(60)
    assert at(app, CAFE).sign_in(BOB, "demo").status_code == 302


def test_alices_device_cookie_does_not_exempt_bobs_account(app, clock):
    alices = device_cookie(app, ALICE, ALICE_HOME)
    hold_at_cap(app, clock)
    refused = at(app, CAFE, alices).sign_in(BOB, "demo")
    assert refused.status_code == 429 and ACCOUNT_WAIT.search(refused.get_data(as_text=True))
    assert at(app, CAFE, alices).sign_in(ALICE, "demo").status_code == 302  # hers, for her account


def _resigned(app, cookie, key, salt):
    """Bob's real device cookie's contents, signed again with this key and salt."""
    data = URLSafeTimedSerializer(app.config["SECRET_KEY"], salt=signin.DEVICE_SALT).loads(cookie)
    return URLSafeTimedSerializer(key, salt=salt).dumps(data)


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda app, cookie: cookie[:-2] + ("AA" if cookie[-2:] != "AA" else "BB"), id="tampered"),
        pytest.param(lambda app, cookie: _resigned(app, cookie, app.config["SECRET_KEY"], TOKEN_SALT), id="card-token-salt"),
        pytest.param(lambda app, cookie: _resigned(app, cookie, app.config["SECRET_KEY"], "itsdangerous"), id="default-salt"),
        pytest.param(lambda app, cookie: _resigned(app, cookie, "another-key", signin.DEVICE_SALT), id="other-key"),
        pytest.param(lambda app, cookie: cookie.split(".")[0] + "..", id="unsigned"),
    ],
)
def test_a_forged_or_other_salt_device_cookie_exempts_nothing(app, clock, forge):
    forged = forge(app, device_cookie(app, BOB, BOB_HOME))
    hold_at_cap(app, clock)
    refused = at(app, CAFE, forged).sign_in(BOB, "demo")
    assert refused.status_code == 429 and ACCOUNT_WAIT.search(refused.get_data(as_text=True))


def test_the_session_cookie_is_no_device_cookie(app, clock):
    home = Browser(app, BOB_HOME)
    assert home.sign_in(BOB, "demo").status_code == 302
    session_cookie = home.client.get_cookie("session").value
    hold_at_cap(app, clock)
    refused = at(app, CAFE, session_cookie).sign_in(BOB, "demo")
    assert refused.status_code == 429 and ACCOUNT_WAIT.search(refused.get_data(as_text=True))


def test_a_device_cookie_older_than_its_life_exempts_nothing(app, clock):
    cookie = device_cookie(app, BOB, BOB_HOME)
    clock.shift(signin.DEVICE_KEPT + 1)
    hold_at_cap(app, clock)
    refused = at(app, CAFE, cookie).sign_in(BOB, "demo")
    assert refused.status_code == 429 and ACCOUNT_WAIT.search(refused.get_data(as_text=True))


def test_a_devices_own_failures_past_its_limit_end_its_exemption(app, clock):
    """A stolen device cookie gives DEVICE_TRIES guesses past the account's wait, then no more."""
    stolen = device_cookie(app, BOB, BOB_HOME)
    hold_at_cap(app, clock)
    pages = [at(app, f"203.0.113.{i + 1}", stolen).sign_in(BOB, f"thief{i}") for i in range(signin.DEVICE_TRIES)]
    assert [page.status_code for page in pages] == [200] * signin.DEVICE_TRIES
    assert all("That email and password do not match." in page.get_data(as_text=True) for page in pages)
    refused = at(app, "203.0.113.200", stolen).sign_in(BOB, "demo")  # even the right password
    assert refused.status_code == 429 and ACCOUNT_WAIT.search(refused.get_data(as_text=True))


def test_a_devices_failures_do_not_slow_the_account_down(app, clock):
    cookie = device_cookie(app, BOB, BOB_HOME)
    laptop = at(app, CAFE, cookie)
    assert [laptop.sign_in(BOB, "typo").status_code for _ in range(8)] == [200] * 8
    assert at(app, "192.0.2.50").sign_in(BOB, "demo").status_code == 302  # no wait at a new address


def test_the_sign_in_a_device_cookie_makes_spends_it(app, clock):
    """A copy taken before the person's next sign-in on that device exempts nothing afterwards."""
    copied = device_cookie(app, BOB, BOB_HOME)
    assert at(app, BOB_HOME, copied).sign_in(BOB, "demo").status_code == 302
    hold_at_cap(app, clock)
    refused = at(app, CAFE, copied).sign_in(BOB, "wrong")
    assert refused.status_code == 429 and ACCOUNT_WAIT.search(refused.get_data(as_text=True))


def test_a_device_cookie_does_not_lift_the_block_on_its_address(app):
    cookie = device_cookie(app, BOB, BOB_HOME)
    laptop = at(app, CAFE, cookie)
    assert [laptop.sign_in(f"n{i}@example.com", "x").status_code for i in range(10)] == [200] * 10
    blocked = laptop.sign_in(BOB, "demo")
    assert blocked.status_code == 429
    assert "Too many failed sign-ins from your address." in blocked.get_data(as_text=True)
