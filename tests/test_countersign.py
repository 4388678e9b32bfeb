"""The two-person rule (issue 16): manage_files' delete_folder needs an admin's countersignature.
The person confirms (the first signature), the card waits, a second, different person of the
tenant whom the rule allows countersigns, and only then does handle() run, once, as the person."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Approval, AuditEvent, Message, User
from tests.conftest import TOKEN, api_headers, outcome_row
from tests.helpers.countersign import (  # noqa: F401 (admin, folder, handled: fixtures)
    FOLDER_DELETE,
    admin,
    card_for,
    confirmed,
    folder,
    handled,
    second_token,
    token_for,
)


@pytest.fixture
def bob(sign_in):
    return sign_in("bob@example.com")


def status_of(app, approval_id: str) -> Approval:
    with app.app_context():
        approval = db.session.get(Approval, approval_id)
        db.session.expunge(approval)
        return approval


def user(app, email: str) -> User:
    with app.app_context():
        found = db.session.scalar(sa.select(User).where(User.email == email))
        db.session.expunge(found)
        return found


def audit_rows(app, approval_id: str) -> list[tuple[str, str, int | None, str]]:
    with app.app_context():
        rows = db.session.scalars(sa.select(AuditEvent).where(AuditEvent.approval_id == approval_id).order_by(AuditEvent.id))
        return [(r.event, r.outcome, r.user_id, r.detail) for r in rows]


# The engine and the browser ------------------------------------------------------------------


def test_the_card_remembers_who_must_countersign(app, alice, folder):
    approval_id, _ = alice.card(alice.say(alice.new_conversation(), FOLDER_DELETE))
    assert status_of(app, approval_id).countersign == "admin"
    file_id, _ = alice.card(alice.say(alice.new_conversation(), "/manage_files operation=delete path=reports/old.csv"))
    assert status_of(app, file_id).countersign is None  # one file: the person's word is enough


def test_a_countersignature_after_a_later_message_tells_the_countersigned_outcome(app, alice, admin, folder):
    convo = alice.new_conversation()
    approval_id, token = alice.card(alice.say(convo, FOLDER_DELETE))
    alice.answer(approval_id, token)  # confirmed: it waits for the countersignature
    alice.say(convo, "/list_posts")  # the conversation moves on meanwhile
    admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    with app.app_context():
        said = db.session.scalar(
            sa.select(Message.text)
            .where(Message.conversation_id == convo, Message.role == "assistant")
            .order_by(Message.id.desc())
            .limit(1)
        )
    assert said.startswith("Done.") and "reports" in said and "Refused" not in said


def test_the_persons_confirm_runs_nothing_and_waits(app, alice, folder, handled):
    approval_id = confirmed(alice)
    approval = status_of(app, approval_id)
    assert approval.status == "countersigning" and approval.confirmed_by == user(app, "alice@example.com").id
    assert approval.confirmed_at is not None and approval.decided_at is None
    assert handled == [] and (folder / "old.csv").exists()


def test_an_admin_countersigns_and_it_runs_once_as_the_person(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    assert response.status_code == 200 and outcome_row("Deleted", "done") in response.get_data(as_text=True)
    assert handled == [("delete_folder", "alice@example.com")]  # as the person who asked, not the admin
    assert not folder.exists()
    approval = status_of(app, approval_id)
    assert approval.status == "done"
    assert approval.decided_by == user(app, "admin@example.com").id
    assert approval.confirmed_by == user(app, "alice@example.com").id


def test_both_signatures_are_in_the_audit_chain(app, alice, admin, folder):
    approval_id = confirmed(alice)
    admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    alice_id, admin_id = user(app, "alice@example.com").id, user(app, "admin@example.com").id
    rows = audit_rows(app, approval_id)
    assert ("approval.signed", "countersigning", alice_id) in [r[:3] for r in rows]
    (decided,) = [r for r in rows if r[0] == "approval.decided"]
    assert decided[1:3] == ("done", admin_id)
    assert f"confirmed by user {alice_id}, countersigned by user {admin_id}" in decided[3]
    from app.copilot.audit import verify

    with app.app_context():
        assert verify().ok


def test_a_second_press_runs_nothing_again(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    token = second_token(admin, approval_id)
    assert admin.htmx_post(f"/approvals/{approval_id}/countersign", token=token).status_code == 200
    again = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=token)
    assert again.status_code == 409 and len(handled) == 1


def test_the_person_cannot_countersign_their_own(app, alice, folder, handled):
    from app.copilot.approvals import sign_second

    approval_id = confirmed(alice)
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    assert f"/approvals/{approval_id}/countersign" not in page  # no such button for her
    with app.test_request_context():
        sid = _session_id(app, alice)
        forged = sign_second(approval_id, db.session.get(User, user(app, "alice@example.com").id), sid)
    response = alice.htmx_post(f"/approvals/{approval_id}/countersign", token=forged)
    assert response.status_code == 403 and handled == []
    assert status_of(app, approval_id).status == "countersigning"
    assert "countersign_own_request" in [r[3] for r in audit_rows(app, approval_id)]


def test_a_second_confirm_by_the_person_is_no_countersignature(app, alice, folder, handled):
    approval_id, token = alice.card(alice.say(alice.new_conversation(), FOLDER_DELETE))
    alice.answer(approval_id, token)
    assert alice.answer(approval_id, token).status_code == 409
    assert handled == [] and status_of(app, approval_id).status == "countersigning"


def test_a_card_token_is_no_countersignature(app, alice, admin, folder, handled):
    approval_id, token = alice.card(alice.say(alice.new_conversation(), FOLDER_DELETE))
    alice.answer(approval_id, token)
    assert alice.htmx_post(f"/approvals/{approval_id}/countersign", token=token).status_code == 400
    assert admin.htmx_post(f"/approvals/{approval_id}/countersign", token=token).status_code == 400
    assert handled == []


def test_bob_who_is_no_admin_cannot_countersign_nor_see_it(app, alice, bob, admin, folder, handled):
    from app.copilot.approvals import sign_second

    approval_id = confirmed(alice)
    assert bob.client.get(f"/approvals/{approval_id}").status_code == 403
    with app.test_request_context():
        token = sign_second(approval_id, db.session.get(User, user(app, "bob@example.com").id), _session_id(app, bob))
    response = bob.htmx_post(f"/approvals/{approval_id}/countersign", token=token)
    assert response.status_code == 403 and "Deleted" not in response.get_data(as_text=True)
    assert "reports" not in response.get_data(as_text=True)  # the error, never the card
    assert handled == [] and status_of(app, approval_id).status == "countersigning"
    assert "countersign_not_allowed" in [r[3] for r in audit_rows(app, approval_id)]


def test_another_tenants_admin_finds_nothing(app, alice, folder, handled):
    with app.app_context():  # carol is of globex in the demo: make her an admin there
        carol = db.session.scalar(sa.select(User).where(User.email == "carol@example.com"))
        carol.is_admin = True
        db.session.commit()
    carol_client = type(alice)(app, "carol@example.com")
    approval_id = confirmed(alice)
    assert carol_client.client.get(f"/approvals/{approval_id}").status_code == 404
    from app.copilot.approvals import sign_second

    with app.test_request_context():
        token = sign_second(
            approval_id,
            db.session.get(User, user(app, "carol@example.com").id),
            _session_id(app, carol_client),
        )
    assert carol_client.htmx_post(f"/approvals/{approval_id}/countersign", token=token).status_code == 404
    assert handled == []
    assert "Waiting for your countersignature" in carol_client.client.get("/admin/").get_data(as_text=True)
    assert approval_id not in carol_client.client.get("/admin/").get_data(as_text=True)


def test_another_admins_token_is_not_this_admins(app, alice, admin, sign_in, folder, handled):
    approval_id = confirmed(alice)
    token = second_token(admin, approval_id)
    other_session = sign_in("admin@example.com")  # the same admin, another session
    assert other_session.htmx_post(f"/approvals/{approval_id}/countersign", token=token).status_code == 403
    assert handled == []


def test_the_person_may_decline_while_it_waits(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    token = TOKEN.findall(page)[-1]
    response = alice.answer(approval_id, token, "decline")
    assert response.status_code == 200 and status_of(app, approval_id).status == "declined"
    assert (
        admin.htmx_post(
            f"/approvals/{approval_id}/countersign", token=_any_second_token(app, admin, approval_id, "admin@example.com")
        ).status_code
        == 409
    )
    assert handled == [] and folder.exists()


def test_the_admin_may_decline_instead(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    response = admin.htmx_post(
        f"/approvals/{approval_id}/countersign/decline", token=second_token(admin, approval_id), reason="Keep the reports."
    )
    assert response.status_code == 200
    approval = status_of(app, approval_id)
    assert approval.status == "declined" and approval.decided_by == user(app, "admin@example.com").id
    assert approval.feedback == "Keep the reports."
    assert handled == [] and folder.exists()


def test_bob_cannot_decline_it_either(app, alice, bob, folder):
    from app.copilot.approvals import sign_second

    approval_id = confirmed(alice)
    with app.test_request_context():
        token = sign_second(approval_id, db.session.get(User, user(app, "bob@example.com").id), _session_id(app, bob))
    assert bob.htmx_post(f"/approvals/{approval_id}/countersign/decline", token=token).status_code == 403
    assert status_of(app, approval_id).status == "countersigning"


def test_nothing_to_countersign_before_the_person_confirms(app, alice, admin, folder, handled):
    approval_id, _ = alice.card(alice.say(alice.new_conversation(), FOLDER_DELETE))
    token = _any_second_token(app, admin, approval_id, "admin@example.com")
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=token)
    assert response.status_code == 409 and handled == [] and status_of(app, approval_id).status == "pending"


def test_the_ttl_covers_both_signatures(app, alice, admin, folder, handled):
    import time_machine

    from app.models import utcnow

    approval_id = confirmed(alice)
    token = second_token(admin, approval_id)
    with time_machine.travel(utcnow() + _ttl(app) + _seconds(5), tick=False):
        response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=token)
        assert response.status_code == 410
    assert status_of(app, approval_id).status == "expired" and handled == [] and folder.exists()


def test_the_sweep_expires_a_card_waiting_for_its_countersignature(app, alice, folder):
    import time_machine

    from app import copilot
    from app.models import utcnow

    approval_id = confirmed(alice)
    with time_machine.travel(utcnow() + _ttl(app) + _seconds(5), tick=False), app.app_context():
        ended = copilot.expire_due()
        assert [a.id for a in ended] == [approval_id]
    assert status_of(app, approval_id).status == "expired"


def test_a_changed_folder_is_not_deleted_after_the_countersignature(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    (folder / "new.csv").write_text("added after the card")
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    assert "Changed — nothing ran" in response.get_data(as_text=True)
    assert handled == [] and (folder / "new.csv").exists()


def test_authorize_runs_again_as_the_person(app, alice, admin, folder, handled, monkeypatch):
    from app.actions.manage_files import ManageFiles

    asked: list[str] = []

    def authorize(self, ctx, input):  # alice may no longer; the admin may (if asked as the admin, it would run)
        asked.append(ctx.user.email)
        return ctx.user.email == "admin@example.com"

    approval_id = confirmed(alice)
    monkeypatch.setattr(ManageFiles, "authorize", authorize)
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    assert "Refused — nothing ran" in response.get_data(as_text=True)
    assert asked[-1] == "alice@example.com" and handled == []


def test_the_console_lists_what_waits_for_this_admin(app, alice, admin, folder):
    approval_id = confirmed(alice)
    html = admin.client.get("/admin/").get_data(as_text=True)
    queue = html.split("Waiting for your countersignature", 1)[1].split("</section>", 1)[0]
    assert approval_id in queue and "alice@example.com" in queue and "Countersign" in queue
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=TOKEN.findall(queue)[0])
    assert outcome_row("Deleted", "done") in response.get_data(as_text=True)
    html = admin.client.get("/admin/").get_data(as_text=True)
    assert "Nothing waits for your countersignature." in html


def test_an_admins_own_request_is_not_in_their_queue(app, admin, folder, handled):
    approval_id = confirmed(admin)
    html = admin.client.get("/admin/").get_data(as_text=True)
    assert "Nothing waits for your countersignature." in html
    assert f"/approvals/{approval_id}/countersign" not in admin.client.get(f"/approvals/{approval_id}").get_data(as_text=True)


def test_without_htmx_the_countersign_lands_on_the_cards_page(app, alice, admin, folder):
    approval_id = confirmed(alice)
    token = second_token(admin, approval_id)
    response = admin.client.post(
        f"/approvals/{approval_id}/countersign", data={"token": token, "csrf_token": _form_csrf(admin, approval_id)}
    )
    assert response.status_code == 302 and response.headers["Location"].endswith(f"/approvals/{approval_id}")


def test_the_countersign_needs_csrf(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    token = second_token(admin, approval_id)
    assert admin.client.post(f"/approvals/{approval_id}/countersign", data={"token": token}).status_code == 400
    assert handled == []


def test_the_model_hears_after_the_second_signature(app, alice, admin, folder):
    approval_id = confirmed(alice)
    with app.app_context():
        from app.models import Run

        run = db.session.get(Run, status_of(app, approval_id).run_id)
        assert run.status == "paused"  # the first signature alone resumes nothing
    admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    with app.app_context():
        run = db.session.get(Run, status_of(app, approval_id).run_id)
        assert run.status != "paused"


# The API ------------------------------------------------------------------------------------


def test_api_the_queue_and_the_countersign(app, alice, folder, handled):
    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "admin@example.com", "client")
    (queued,) = client.get("/api/countersign", headers=headers).get_json()["approvals"]
    assert queued["id"] == approval_id and queued["requested_by"] == "alice@example.com" and queued["token"]
    assert "arguments" not in queued
    response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": queued["token"]}, headers=headers)
    assert response.status_code == 200 and response.get_json()["status"] == "done"
    assert handled == [("delete_folder", "alice@example.com")]


def test_api_an_agent_token_gets_no_token_and_cannot_countersign(app, alice, folder, handled):
    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "admin@example.com", "agent")
    (queued,) = client.get("/api/countersign", headers=headers).get_json()["approvals"]
    assert queued["token"] is None
    client_headers = token_for(app, "admin@example.com", "client")
    (real,) = client.get("/api/countersign", headers=client_headers).get_json()["approvals"]
    response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": real["token"]}, headers=headers)
    assert response.status_code == 403 and response.get_json()["error"] == "AgentCannotAnswer"
    assert handled == [] and "countersign_agent_credential" in [r[3] for r in audit_rows(app, approval_id)]


def test_api_the_person_cannot_countersign_their_own(app, alice, folder, handled):
    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "alice@example.com", "client")
    assert client.get("/api/countersign", headers=headers).get_json()["approvals"] == []
    from app.copilot.approvals import sign_second

    with app.test_request_context():
        token_id = _newest_token_id(app, "alice@example.com")
        forged = sign_second(approval_id, db.session.get(User, user(app, "alice@example.com").id), f"pat:{token_id}")
    response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": forged}, headers=headers)
    assert response.status_code == 403 and response.get_json()["error"] == "OwnCountersign" and handled == []


def test_api_bob_cannot_countersign(app, alice, folder, handled):
    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "bob@example.com", "client")
    assert client.get("/api/countersign", headers=headers).get_json()["approvals"] == []
    from app.copilot.approvals import sign_second

    with app.test_request_context():
        forged = sign_second(
            approval_id,
            db.session.get(User, user(app, "bob@example.com").id),
            f"pat:{_newest_token_id(app, 'bob@example.com')}",
        )
    response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": forged}, headers=headers)
    assert response.status_code == 403 and handled == []


def test_api_the_person_declines_while_it_waits(app, alice, folder, handled):
    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "alice@example.com", "client")
    (mine,) = client.get("/api/approvals?status=countersigning", headers=headers).get_json()["approvals"]
    assert mine["token"]
    response = client.post(f"/api/approvals/{approval_id}/decline", json={"token": mine["token"]}, headers=headers)
    assert response.status_code == 200 and response.get_json()["status"] == "declined" and handled == []


def test_api_the_admin_declines_with_a_reason(app, alice, folder, handled):
    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "admin@example.com", "client")
    (queued,) = client.get("/api/countersign", headers=headers).get_json()["approvals"]
    response = client.post(
        f"/api/approvals/{approval_id}/countersign/decline",
        json={"token": queued["token"], "reason": "Not today."},
        headers=headers,
    )
    assert response.get_json()["status"] == "declined" and status_of(app, approval_id).feedback == "Not today."


def test_api_the_person_confirms_with_a_client_token_and_it_waits(app, folder, handled):
    client, headers = app.test_client(), token_for(app, "alice@example.com", "client")
    convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
    body = client.post(f"/api/conversations/{convo}/messages", json={"text": FOLDER_DELETE}, headers=headers).get_json()
    (prompt,) = body["pending"]
    response = client.post(f"/api/approvals/{prompt['id']}/confirm", json={"token": prompt["token"]}, headers=headers)
    assert response.get_json()["status"] == "countersigning" and handled == []


# Connectors, MCP and the kit ------------------------------------------------------------------


def test_a_chat_yes_gives_no_signature(app, folder, handled):
    from app import copilot
    from app.copilot.approvals import Actor, ChannelProof
    from app.errors import NeedsSecondSignature

    approval_id = card_for(app, "alice@example.com")
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        actor = Actor(user=alice, binding="telegram:42", channel="telegram")
        with pytest.raises(NeedsSecondSignature):
            copilot.answer(approval_id, ChannelProof("telegram verified sender"), actor, "confirm")
    assert status_of(app, approval_id).status == "pending" and handled == []
    assert "countersigned_card_by_channel" in [r[3] for r in audit_rows(app, approval_id)]


def test_a_connector_links_a_countersigned_card_instead_of_asking_yes(app, folder):
    from app.connectors.base import post_card

    approval_id = card_for(app, "alice@example.com")
    sent: list[str] = []

    class Chat:
        name = "telegram"
        confirms_by_reply = True

        def send(self, thread, text):
            sent.append(text)

        def send_card(self, thread, approval, text):  # pragma: no cover - must not be reached
            sent.append("CARD " + text)

    with app.app_context():
        from app.models import ConnectorThread

        thread = ConnectorThread(
            connector="telegram", thread_key="t1", user_id=user(app, "alice@example.com").id, conversation_id=0
        )
        post_card(Chat(), thread, db.session.get(Approval, approval_id))
    assert len(sent) == 1 and f"/approvals/{approval_id}" in sent[0] and "Reply 'Yes'" not in sent[0]


def test_the_kit_countersigns(copilot, tmp_path):
    from app.actions.manage_files import ManageFiles

    reports = Path(copilot.app.config["FILES_ROOT"], "acme", "reports")
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "a.txt").write_text("a")
    copilot.as_person("alice@example.com").chat(FOLDER_DELETE)
    card = copilot.pending()
    assert card.confirm() == "countersigning" and copilot.calls(ManageFiles) == 0
    assert card.countersign() == "own_request"
    copilot.as_person("bob@example.com")
    assert card.countersign() == "wrong_person"
    copilot.as_person("admin@example.com")
    assert card.countersign() == "done" and copilot.calls(ManageFiles) == 1
    assert card.countersign() == "already_decided" and copilot.calls(ManageFiles) == 1
    assert not reports.exists()


# Race -----------------------------------------------------------------------------------------


def test_32_simultaneous_countersigns_run_handle_exactly_once(app, folder, handled):
    client_headers = token_for(app, "admin@example.com", "client")
    client = app.test_client()
    for trial in range(5):
        (folder.parent / f"r{trial}").mkdir()
        (folder.parent / f"r{trial}" / "x.txt").write_text("x")
        approval_id = card_for(app, "alice@example.com", path=f"r{trial}", confirm=True)
        (queued,) = [
            q for q in client.get("/api/countersign", headers=client_headers).get_json()["approvals"] if q["id"] == approval_id
        ]
        start = threading.Barrier(32)
        statuses: list[int] = []
        lock = threading.Lock()

        def press(start=start, queued=queued, statuses=statuses, lock=lock) -> None:
            own = app.test_client()
            start.wait()
            response = own.post(
                f"/api/approvals/{queued['id']}/countersign", json={"token": queued["token"]}, headers=client_headers
            )
            with lock:
                statuses.append(response.status_code)

        threads = [threading.Thread(target=press) for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        runs = [h for h in handled if h[0] == "delete_folder"]
        assert len(runs) == trial + 1, f"trial {trial}: handle ran {len(runs) - trial} times"
        assert sorted(statuses) == [200] + [409] * 31, f"trial {trial}: {sorted(statuses)}"


# Declaring the rule -----------------------------------------------------------------------------


def test_a_countersign_rule_on_an_operation_without_a_card_fails_at_start():
    from types import ModuleType

    from pydantic import BaseModel

    from app.copilot.actions import Action, Kind, Registry, expose, register
    from app.errors import ActionDeclarationError

    @expose("files")
    class Tidy(Action):
        """Tidy."""

        kind = Kind.WRITE
        countersign = "admin"

        class Input(BaseModel):
            n: int = 1

        def handle(self, ctx, input):
            return "ok"

    with pytest.raises(ActionDeclarationError, match="countersign is set on an action whose calls may run without a card"):
        register(Registry(), Tidy, ModuleType("tidy"))


def test_a_countersign_rule_must_name_someone():
    from types import ModuleType

    from pydantic import BaseModel

    from app.copilot.actions import Action, Kind, Registry, expose, register
    from app.errors import ActionDeclarationError

    @expose("files")
    class Wipe(Action):
        """Wipe."""

        kind = Kind.DESTRUCTIVE
        reason = "Wipe?"
        countersign = "someone"

        class Input(BaseModel):
            n: int = 1

        def handle(self, ctx, input):
            return "ok"

    with pytest.raises(ActionDeclarationError, match="names nobody"):
        register(Registry(), Wipe, ModuleType("wipe"))


def test_a_callable_rule_names_who_may_sign(app, folder, handled, monkeypatch):
    from app.actions.manage_files import ManageFiles
    from app.copilot.actions import Countersign

    bob_only = Countersign(
        "bob", lambda signer, ctx, input: signer.email == "bob@example.com" and ctx.user.email == "alice@example.com"
    )
    monkeypatch.setattr(ManageFiles, "countersign", {"delete_folder": bob_only})
    approval_id = card_for(app, "alice@example.com", confirm=True)
    from app.copilot import engine
    from app.copilot.approvals import may_countersign

    with app.app_context():
        approval = db.session.get(Approval, approval_id)
        assert approval.countersign == "bob"
        people = {u.email: may_countersign(approval, u, engine().registry) for u in db.session.scalars(sa.select(User))}
    assert people == {"alice@example.com": False, "bob@example.com": True, "admin@example.com": False, "carol@example.com": False}


# helpers ----------------------------------------------------------------------------------------


def _session_id(app, person) -> str:
    with person.client.session_transaction() as session:
        return f"web:{session['sid']}"


def _any_second_token(app, person, approval_id: str, email: str) -> str:
    from app.copilot.approvals import sign_second

    with app.test_request_context():
        return sign_second(approval_id, db.session.get(User, user(app, email).id), _session_id(app, person))


def _newest_token_id(app, email: str) -> int:
    from app.models import ApiToken

    with app.app_context():
        uid = user(app, email).id
        return db.session.scalar(sa.select(sa.func.max(ApiToken.id)).where(ApiToken.user_id == uid))


def _form_csrf(person, approval_id: str) -> str:
    html = person.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def _ttl(app):
    from datetime import timedelta

    return timedelta(seconds=int(app.config["APPROVALS_TTL"]))


def _seconds(n: int):
    from datetime import timedelta

    return timedelta(seconds=n)


def test_actions_check_covers_a_countersigned_operation(countersign_template_db, countersign_app_factory, tmp_path):
    from app.actions.manage_files import ManageFiles
    from app.copilot.kit import check_action, running

    with running(countersign_template_db, tmp_path, freeze=False, factory=countersign_app_factory) as kit:
        reports = Path(kit.app.config["FILES_ROOT"], "acme", "reports")
        reports.mkdir(parents=True, exist_ok=True)
        (reports / "a.txt").write_text("a")
        assert check_action(kit, "manage_files") == []
        assert kit.calls(ManageFiles) == 0 and reports.exists()


def test_actions_check_catches_a_card_its_person_could_countersign(
    countersign_template_db, countersign_app_factory, tmp_path, monkeypatch
):
    from app.copilot.approvals import _countersigning as countersigning
    from app.copilot.kit import check_action, running

    monkeypatch.setattr(countersigning, "verify_second", lambda approval_id, token, actor: db.session.get(Approval, approval_id))
    monkeypatch.setattr(countersigning, "may_countersign", lambda approval, user, registry: True)
    with running(countersign_template_db, tmp_path, freeze=False, factory=countersign_app_factory) as kit:
        reports = Path(kit.app.config["FILES_ROOT"], "acme", "reports")
        reports.mkdir(parents=True, exist_ok=True)
        problems = check_action(kit, "manage_files")
    assert "manage_files: the person who asked could countersign their own card" in problems


def test_a_card_that_needs_no_countersignature_cannot_be_countersigned(app, alice, admin, folder):
    html = alice.say(alice.new_conversation(), "/manage_files operation=delete path=reports/old.csv")
    approval_id, _ = alice.card(html)
    token = _any_second_token(app, admin, approval_id, "admin@example.com")
    assert admin.htmx_post(f"/approvals/{approval_id}/countersign", token=token).status_code == 400
    assert status_of(app, approval_id).status == "pending" and (folder / "old.csv").exists()


def test_a_client_token_outside_the_toolset_cannot_countersign(app, alice, folder, handled):
    approval_id = confirmed(alice)
    with app.app_context():
        admin_user = db.session.scalar(sa.select(User).where(User.email == "admin@example.com"))
        headers = api_headers(create_token(admin_user, scope="client", toolsets="blog"))
    client = app.test_client()
    (queued,) = client.get("/api/countersign", headers=headers).get_json()["approvals"]
    assert queued["token"] is None
    from app.copilot.approvals import sign_second

    with app.test_request_context():
        token = sign_second(
            approval_id,
            db.session.get(User, user(app, "admin@example.com").id),
            f"pat:{_newest_token_id(app, 'admin@example.com')}",
        )
    response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": token}, headers=headers)
    assert response.status_code == 403 and response.get_json()["error"] == "OutsideToolsets" and handled == []


def test_openapi_describes_the_countersignature(app):
    paths = app.test_client().get("/api/openapi.json").get_json()["paths"]
    assert "get" in paths["/api/countersign"]
    assert paths["/api/approvals/{id}/countersign"]["post"]["requestBody"]
    assert "/api/approvals/{id}/countersign/decline" in paths


def test_api_another_tenants_admin_finds_nothing(app, alice, folder, handled):
    approval_id = confirmed(alice)
    with app.app_context():
        carol = db.session.scalar(sa.select(User).where(User.email == "carol@example.com"))
        carol.is_admin = True
        db.session.commit()
    client, headers = app.test_client(), token_for(app, "carol@example.com", "client")
    assert client.get("/api/countersign", headers=headers).get_json()["approvals"] == []
    from app.copilot.approvals import sign_second

    with app.test_request_context():
        token = sign_second(
            approval_id,
            db.session.get(User, user(app, "carol@example.com").id),
            f"pat:{_newest_token_id(app, 'carol@example.com')}",
        )
    response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": token}, headers=headers)
    assert response.status_code == 404 and handled == []


def test_api_expired_while_it_waits_is_410_and_runs_nothing(app, alice, folder, handled):
    import time_machine

    from app.models import utcnow

    approval_id = confirmed(alice)
    client, headers = app.test_client(), token_for(app, "admin@example.com", "client")
    (queued,) = client.get("/api/countersign", headers=headers).get_json()["approvals"]
    with time_machine.travel(utcnow() + _ttl(app) + _seconds(5), tick=False):
        assert client.get("/api/countersign", headers=headers).get_json()["approvals"] == []
        response = client.post(f"/api/approvals/{approval_id}/countersign", json={"token": queued["token"]}, headers=headers)
    assert response.status_code == 410 and handled == [] and status_of(app, approval_id).status == "expired"


def test_the_kit_declines_as_the_second_person(copilot):
    from app.actions.manage_files import ManageFiles

    reports = Path(copilot.app.config["FILES_ROOT"], "acme", "reports")
    reports.mkdir(parents=True, exist_ok=True)
    copilot.as_person("alice@example.com").chat(FOLDER_DELETE)
    card = copilot.pending()
    assert card.confirm() == "countersigning"
    copilot.as_person("admin@example.com")
    assert card.countersign(decline=True, reason="Not this week.") == "declined"
    assert copilot.calls(ManageFiles) == 0 and reports.exists()


def test_a_fresh_card_of_a_countersigned_request_needs_the_countersignature_too(app, alice, admin, folder, handled):
    """A changed card's Fresh card is the same request: the two-person rule comes with it (the
    person's confirm of the fresh card waits again; it never runs on one signature)."""
    approval_id = confirmed(alice)
    (folder / "new.csv").write_text("added after the card")
    response = admin.htmx_post(f"/approvals/{approval_id}/countersign", token=second_token(admin, approval_id))
    assert "Changed — nothing ran" in response.get_data(as_text=True)
    page = alice.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
    refresh_token = TOKEN.findall(page.split("card__changes", 1)[1])[0]
    html = alice.htmx_post(f"/approvals/{approval_id}/refresh", token=refresh_token).get_data(as_text=True)
    fresh, fresh_token = alice.card(html)
    assert status_of(app, fresh).countersign == "admin" and status_of(app, fresh).replaces == approval_id
    assert "Confirmed — waiting for a countersignature" in alice.answer(fresh, fresh_token).get_data(as_text=True)
    assert handled == [] and (folder / "old.csv").exists()
    response = admin.htmx_post(f"/approvals/{fresh}/countersign", token=second_token(admin, fresh))
    assert outcome_row("Deleted", "done") in response.get_data(as_text=True)
    assert handled == [("delete_folder", "alice@example.com")]


def test_both_people_are_offered_a_reason_box_and_a_long_reason_is_refused_whole(app, alice, admin, folder, handled):
    approval_id = confirmed(alice)
    for person in (alice, admin):  # the person who asked (withdraw) and the second person
        page = person.client.get(f"/approvals/{approval_id}").get_data(as_text=True)
        assert 'name="reason"' in page and "Tell the assistant why" in page
    response = admin.htmx_post(
        f"/approvals/{approval_id}/countersign/decline", token=second_token(admin, approval_id), reason="x" * 1001
    )
    assert response.status_code == 400 and "too long" in response.get_data(as_text=True)
    assert status_of(app, approval_id).status == "countersigning"  # nothing decided, nothing cut
    assert handled == [] and folder.exists()
