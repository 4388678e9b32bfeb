"""Every decision reaches every view (issue 24): a card's change of status, from any channel or
process, is an `approval` event on its conversation's stream; an open page's stream turns it into
the card in its new state for that viewer (out of band, no token, no buttons unless the viewer
may still answer it); a press on a card decided elsewhere says who decided it; the admin
console's counts follow."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from app.copilot import events
from app.extensions import db
from app.models import Approval, utcnow
from tests.helpers.countersign import FOLDER_DELETE, admin, folder, second_token, token_for  # noqa: F401 (fixtures)


@pytest.fixture
def app_config() -> dict[str, Any]:
    # A stream that finds nothing ends soon (then the test fails, it never hangs); every event a
    # test reads is in Redis before its stream opens.
    return {"EVENTS_STREAM_SECONDS": 20, "EVENTS_HEARTBEAT": 1, "EVENTS_RECHECK": 1}


def asked(alice, text: str) -> tuple[int, str, str, str]:
    """alice asks in a new conversation: (conversation, card id, its token, the stream's cursor)."""
    convo = alice.new_conversation()
    approval_id, token = alice.card(alice.say(convo, text))
    return convo, approval_id, token, cursor_of(alice, convo)


def cursor_of(person, convo: int) -> str:
    """Where alice's open chat page's stream goes on from (what the page already shows)."""
    page = person.client.get(f"/c/{convo}").get_data(as_text=True)
    return re.search(r"since=([0-9-]+)", page).group(1)  # type: ignore[union-attr]


def approval_events(app, convo: int, approval_id: str) -> list[str]:
    """The statuses the conversation's stream says this card moved to, in order."""
    with app.app_context():
        found = events.read(convo, "0-0", None)
    return [e.data["status"] for e in found if e.type == "approval" and e.data.get("id") == approval_id]


def card_on_stream(person, url: str, approval_id: str) -> str:
    """The card fragment a page's open stream (`url`) sends for this card: read until it comes."""
    response = person.client.get(url, buffered=False)
    assert response.status_code == 200
    body = ""
    try:
        for chunk in response.response:
            body += chunk.decode()
            found = re.search(rf'<div id="approval-{approval_id}".*?(?=\n\n)', body, re.S)
            if found:
                return found.group(0)
    finally:
        response.close()
    raise AssertionError(f"no card {approval_id} on the stream: {body[-2000:]}")


def assert_decided_without_buttons(fragment: str, status: str) -> None:
    assert 'hx-swap-oob="true"' in fragment  # replaces the card on the page, wherever it is
    assert f"card--{status}" in fragment
    assert 'name="token"' not in fragment and "<button" not in fragment


def test_a_revoke_is_on_the_stream_and_alices_page_gets_her_card_without_buttons(app, alice, admin, posts):
    convo, approval_id, _, cursor = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    assert admin.htmx_post(f"/admin/approvals/{approval_id}/revoke").status_code == 302
    assert approval_events(app, convo, approval_id) == ["revoked"]
    fragment = card_on_stream(alice, f"/c/{convo}/events?since={cursor}", approval_id)
    assert_decided_without_buttons(fragment, "revoked")


def test_an_expiry_by_the_sweep_is_on_the_stream_and_alices_page_gets_it(app, alice, posts):
    convo, approval_id, _, cursor = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    with app.app_context():
        db.session.get(Approval, approval_id).expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    assert app.test_cli_runner().invoke(args=["approvals", "sweep"]).exit_code == 0
    assert approval_events(app, convo, approval_id) == ["expired"]
    fragment = card_on_stream(alice, f"/c/{convo}/events?since={cursor}", approval_id)
    assert_decided_without_buttons(fragment, "expired")


def test_a_countersignature_is_on_the_stream_and_alices_page_gets_the_done_card(app, alice, admin, folder):
    convo, approval_id, token, _ = asked(alice, FOLDER_DELETE)
    alice.answer(approval_id, token)  # her signature: the card waits for the admin's
    cursor = cursor_of(alice, convo)
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    assert response.status_code == 200
    assert approval_events(app, convo, approval_id) == ["countersigning", "running", "done"]
    fragment = card_on_stream(alice, f"/c/{convo}/events?since={cursor}", approval_id)
    assert_decided_without_buttons(fragment, "done")


def api_token(app, approval_id: str) -> tuple[Any, dict[str, str], str]:
    """alice's client credential on the API: (client, headers, the card's token for it)."""
    client, headers = app.test_client(), token_for(app, "alice@example.com", "client")
    prompts = client.get("/api/approvals", headers=headers).get_json()["approvals"]
    return client, headers, next(p["token"] for p in prompts if p["id"] == approval_id)


def test_a_confirm_through_the_api_is_on_the_stream_and_the_web_page_gets_the_done_card(app, alice, posts):
    convo, approval_id, _, cursor = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    client, headers, token = api_token(app, approval_id)
    assert client.post(f"/api/approvals/{approval_id}/confirm", json={"token": token}, headers=headers).status_code == 200
    assert approval_events(app, convo, approval_id) == ["running", "done"]
    fragment = card_on_stream(alice, f"/c/{convo}/events?since={cursor}", approval_id)
    assert_decided_without_buttons(fragment, "done")


def test_the_cards_own_page_follows_it_as_its_viewer(app, alice, admin, posts):
    _, approval_id, _, _ = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    stream_url = re.search(r'sse-connect="([^"]+)"', page).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    assert stream_url.startswith(f"/approvals/{approval_id}/events")
    admin.htmx_post(f"/admin/approvals/{approval_id}/revoke")
    assert_decided_without_buttons(card_on_stream(alice, stream_url, approval_id), "revoked")


def test_the_admin_viewing_alices_card_page_gets_a_countersign_button_when_she_confirms(app, alice, admin, folder):
    _, approval_id, token, _ = asked(alice, FOLDER_DELETE)
    page = admin.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    assert f"/approvals/{approval_id}/countersign" not in page  # nothing to countersign yet
    stream_url = re.search(r'sse-connect="([^"]+)"', page).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    alice.answer(approval_id, token)
    fragment = card_on_stream(admin, stream_url, approval_id)
    assert "card--countersigning" in fragment and f"/approvals/{approval_id}/countersign" in fragment
    assert 'name="token"' in fragment  # this viewer may answer it now: the admin's own countersignature token


def test_a_press_on_a_card_the_admin_revoked_says_who_revoked_it(app, alice, admin, posts):
    _, approval_id, token, _ = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    admin.htmx_post(f"/admin/approvals/{approval_id}/revoke")
    response = alice.answer(approval_id, token)
    body = response.get_data(as_text=True)
    assert response.status_code == 409
    assert re.search(r"admin@example\.com revoked this card at \d\d:\d\d UTC\. Nothing ran\.", body)
    assert "already answered" not in body


def test_an_api_answer_to_a_card_declined_by_the_admin_says_who_declined_it(app, alice, admin, folder):
    _, approval_id, token, _ = asked(alice, FOLDER_DELETE)
    client, headers, on_api = api_token(app, approval_id)
    alice.answer(approval_id, token)
    admin.htmx_post(f"/approvals/{approval_id}/countersign/decline", token=second_token(admin, approval_id))
    response = client.post(f"/api/approvals/{approval_id}/confirm", json={"token": on_api}, headers=headers)
    said = str(response.get_json())
    assert response.status_code == 409
    assert "You confirmed this card and admin@example.com declined the countersignature at" in said
    assert "already answered" not in said


def test_pending_now_counts_a_card_waiting_for_its_countersignature_and_says_so(app, alice, admin, folder):
    """The count takes both pending decisions; the table's default (`pending`) lists only the
    person's, so the count says how many wait for a countersignature, and a poll brings it."""
    _, approval_id, token, _ = asked(alice, FOLDER_DELETE)
    page = admin.client.get("/admin/").get_data(as_text=True)
    assert re.search(r'stat__value">1</span><span class="stat__label">pending now</span>', page)
    poll = re.search(r'id="admin-stats" hx-get="([^"]+)"', page).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    alice.answer(approval_id, token)
    body = admin.client.get(poll, headers={"HX-Request": "true"}).get_data(as_text=True)
    said = r'stat__value">1</span><span class="stat__label">pending now: 1 of them waiting for a countersignature</span>'
    assert re.search(said, body), body
    assert re.search(said, admin.client.get("/admin/").get_data(as_text=True))


def test_the_admin_console_polls_its_counts_and_gets_them_when_they_change(app, alice, admin, posts):
    _, approval_id, _, _ = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    page = admin.client.get("/admin/").get_data(as_text=True)
    poll = re.search(r'id="admin-stats" hx-get="([^"]+)" hx-trigger="every 5s"', page).group(1)  # type: ignore[union-attr]
    poll = poll.replace("&amp;", "&")
    assert admin.client.get(poll, headers={"HX-Request": "true"}).status_code == 204  # nothing new
    admin.htmx_post(f"/admin/approvals/{approval_id}/revoke")
    response = admin.client.get(poll, headers={"HX-Request": "true"})
    body = response.get_data(as_text=True)
    assert response.status_code == 200
    assert re.search(r'stat__value">0</span><span class="stat__label">pending now', body)
    assert '<table class="table" id="approval-rows" hx-swap-oob="true">' in body and approval_id not in body


def test_a_card_whose_time_ran_out_asks_for_itself_and_is_expired(app, alice, posts):
    convo, approval_id, _, _ = asked(alice, f"/delete_post post={posts['Spring meetup']}")
    with app.app_context():
        db.session.get(Approval, approval_id).expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    response = alice.client.get(f"/approvals/{approval_id}", headers={"HX-Request": "true"})
    body = response.get_data(as_text=True)
    assert response.status_code == 200 and body.lstrip().startswith(f'<div id="approval-{approval_id}"')
    assert "card--expired" in body and 'name="token"' not in body
    assert approval_events(app, convo, approval_id) == ["expired"]  # and every other open view follows
