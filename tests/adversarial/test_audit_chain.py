"""The audit log against someone who can write the database (issue 13, points 10 and 11): the chain
is keyed with AUDIT_KEY, so no rewrite, cut, re-link or moved head passes `audit verify`; a missing
head does not stop audit writes; checkpoints catch a cut end; the CSV export escapes every cell."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from datetime import timedelta
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from app import create_app
from app.copilot.audit import _chain as audit
from app.copilot.audit import _check as audit_check
from app.extensions import db
from app.models import AuditEvent, AuditHead, AuditMark, Post, Tenant
from tests.conftest import base_config

MADE_UP = b"a key the attacker made up"


# --- helpers: an honest writer, and an attacker with write access to the database -----------------


def tenant_id(app, slug="acme"):
    with app.app_context():
        return db.session.scalar(sa.select(Tenant.id).where(Tenant.slug == slug))


def write_rows(app, n, slug="acme"):
    """n honest audit rows in the tenant's chain (through audit.record, as the app writes them)."""
    chain = tenant_id(app, slug)
    with app.app_context():
        for i in range(n):
            audit.record("approval.decided", "declined", tenant_id=chain, user_id=None, detail=f"row {i + 1}", channel="web")
        db.session.commit()
    return chain


def row_id(app, chain, seq):
    with app.app_context():
        return db.session.scalar(sa.select(AuditEvent.id).where(AuditEvent.chain == chain, AuditEvent.seq == seq))


def set_row(app, chain, seq, **values):
    with app.app_context():
        db.session.execute(sa.update(AuditEvent).where(AuditEvent.chain == chain, AuditEvent.seq == seq).values(values))
        db.session.commit()


def head_row(app, chain):
    with app.app_context():
        return (
            db.session.execute(
                sa.select(AuditHead.seq, AuditHead.hash, AuditHead.key_id, AuditHead.mac).where(AuditHead.chain == chain)
            )
            .one()
            ._asdict()
        )


def set_head(app, chain, **values):
    with app.app_context():
        db.session.execute(sa.update(AuditHead).where(AuditHead.chain == chain).values(values))
        db.session.commit()


def delete_rows(app, chain, *seqs):
    with app.app_context():
        db.session.execute(sa.delete(AuditEvent).where(AuditEvent.chain == chain, AuditEvent.seq.in_(seqs)))
        db.session.commit()


def relink(app, chain, key=MADE_UP, key_id=None, from_seq=1):
    """What an attacker without AUDIT_KEY can do: recompute every link from `from_seq` on, and the
    head, with a key of their own (naming it as `key_id`, or as the real key's id)."""
    with app.app_context():
        rows = db.session.scalars(sa.select(AuditEvent).where(AuditEvent.chain == chain).order_by(AuditEvent.seq)).all()
        prev = ""
        for row in rows:
            if row.seq >= from_seq:
                row.key_id = key_id if key_id is not None else row.key_id
                row.prev_hash = prev
                row.hash = audit.link(key, prev, row)
            prev = row.hash
        last = rows[-1]
        db.session.execute(
            sa.update(AuditHead)
            .where(AuditHead.chain == chain)
            .values(seq=last.seq, hash=last.hash, mac=audit.mac(key, "head", chain, last.seq, last.hash))
        )
        db.session.commit()


def verify(app, *args):
    return app.test_cli_runner().invoke(args=["audit", "verify", *args])


def assert_broken(app, row, *words):
    result = verify(app)
    assert result.exit_code == 1, result.output
    where = f"broken at row {row}:" if row is not None else "broken"
    assert where in result.output, result.output
    for word in words:
        assert word in result.output, result.output
    return result.output


@pytest.fixture
def app_with(database_url):
    """The same database under other settings (another AUDIT_KEY, other fallbacks)."""
    made = []

    def make(**config):
        made.append(create_app(base_config(database_url, **config)))
        return made[-1]

    yield make
    for other in made:
        with other.app_context():
            db.session.remove()
            db.engine.dispose()


# --- the key ---------------------------------------------------------------------------------------


def test_an_untouched_keyed_chain_verifies_and_names_its_key(app):
    chain = write_rows(app, 3)
    result = verify(app)
    assert result.exit_code == 0 and "audit chain verifies: 3 rows" in result.output
    with app.app_context():
        ids = set(db.session.scalars(sa.select(AuditEvent.key_id).where(AuditEvent.chain == chain)))
        assert ids == {audit.keyring().current} and audit.key_id(app.config["AUDIT_KEY"].encode()) in ids


def test_the_audit_key_is_not_the_secret_key_and_is_stored_nowhere_in_the_database(app):
    write_rows(app, 2)
    key = app.config["AUDIT_KEY"]
    assert key and key != app.config["SECRET_KEY"]
    with app.app_context():
        dumped = " ".join(
            str(v)
            for table in (AuditEvent, AuditHead, AuditMark)
            for row in db.session.execute(sa.select(table.__table__))
            for v in row
        )
    assert key not in dumped


def test_default_audit_key_comes_from_secret_key_and_a_rotated_one_still_verifies(monkeypatch):
    from app.config import load

    monkeypatch.delenv("AUDIT_KEY", raising=False)
    monkeypatch.delenv("AUDIT_KEY_FALLBACKS", raising=False)
    monkeypatch.setenv("SECRET_KEY_FALLBACKS", "old-secret")
    rotated = load({"COUNTERSIGN_ENV": "testing", "SECRET_KEY": "new-secret"})
    old = load({"COUNTERSIGN_ENV": "testing", "SECRET_KEY": "old-secret"})
    assert rotated["AUDIT_KEY"] != old["AUDIT_KEY"] and old["AUDIT_KEY"] in rotated["AUDIT_KEY_FALLBACKS"]
    monkeypatch.setenv("AUDIT_KEY", "an-operator's-own-key")
    monkeypatch.setenv("AUDIT_KEY_FALLBACKS", "default")
    own = load({"COUNTERSIGN_ENV": "testing", "SECRET_KEY": "new-secret"})
    assert own["AUDIT_KEY"] == "an-operator's-own-key"
    assert own["AUDIT_KEY_FALLBACKS"] == [rotated["AUDIT_KEY"], old["AUDIT_KEY"]]  # "default": what it was before


def test_rotation_old_rows_verify_while_their_key_is_a_fallback_and_not_after(app, app_with):
    chain = write_rows(app, 2)
    old_key = app.config["AUDIT_KEY"]
    rotated = app_with(AUDIT_KEY="the new audit key", AUDIT_KEY_FALLBACKS=[old_key])
    write_rows(rotated, 2)
    result = verify(rotated)
    assert result.exit_code == 0 and "4 rows" in result.output
    with rotated.app_context():
        new_id = audit.keyring().current
        assert db.session.scalars(sa.select(AuditEvent.key_id).where(AuditEvent.chain == chain).order_by(AuditEvent.seq)).all()[
            2:
        ] == [new_id, new_id]
    dropped = app_with(AUDIT_KEY="the new audit key", AUDIT_KEY_FALLBACKS=[])
    assert_broken(dropped, row_id(app, chain, 1), "neither AUDIT_KEY nor in AUDIT_KEY_FALLBACKS")


# --- every rewrite is named ------------------------------------------------------------------------


def test_edited_detail_relinked_after_it_with_a_made_up_key_is_named(app):
    chain = write_rows(app, 6)
    set_row(app, chain, 3, detail="nothing to see")
    relink(app, chain, from_seq=3)  # the old, unkeyed chain passed this
    assert_broken(app, row_id(app, chain, 3), "content was changed")


def test_edited_created_at_is_named(app):
    chain = write_rows(app, 5)
    with app.app_context():
        row = db.session.scalar(sa.select(AuditEvent).where(AuditEvent.chain == chain, AuditEvent.seq == 2))
        when = row.created_at - timedelta(days=3)
    set_row(app, chain, 2, created_at=when)
    assert_broken(app, row_id(app, chain, 2), "content was changed")


def test_two_swapped_rows_are_named(app):
    chain = write_rows(app, 6)
    first, second = row_id(app, chain, 3), row_id(app, chain, 4)
    with app.app_context():  # through a free seq, so the unique (chain, seq) holds at every step
        for rid, seq in ((first, 1000), (second, 3), (first, 4)):
            db.session.execute(sa.update(AuditEvent).where(AuditEvent.id == rid).values(seq=seq))
        db.session.commit()
    assert_broken(app, second, "does not link")


def test_a_row_inserted_in_the_middle_is_named(app):
    chain = write_rows(app, 5)
    with app.app_context():
        for seq in range(5, 2, -1):  # make room at 3
            db.session.execute(sa.update(AuditEvent).where(AuditEvent.chain == chain, AuditEvent.seq == seq).values(seq=seq + 1))
        prev = db.session.scalar(sa.select(AuditEvent.hash).where(AuditEvent.chain == chain, AuditEvent.seq == 2))
        forged = AuditEvent(
            chain=chain,
            seq=3,
            tenant_id=chain,
            user_id=None,
            approval_id=None,
            event="approval.decided",
            outcome="done",
            detail="approved by nobody",
            channel="web",
            key_id=audit.keyring().current,
            created_at=audit.utcnow(),
            prev_hash=prev,
        )
        forged.hash = audit.link(MADE_UP, prev, forged)
        db.session.add(forged)
        db.session.commit()
        inserted = forged.id
    assert_broken(app, inserted, "content was changed")


def test_a_row_deleted_from_the_middle_is_named(app):
    chain = write_rows(app, 5)
    delete_rows(app, chain, 3)
    assert_broken(app, row_id(app, chain, 4), "sequence 4, expected 3")


def test_the_last_row_deleted_with_the_head_left_is_named(app):
    chain = write_rows(app, 5)
    delete_rows(app, chain, 5)
    assert_broken(app, row_id(app, chain, 4), "removed", "head names row 5")


def test_the_last_row_deleted_with_the_head_moved_back_is_named(app):
    chain = write_rows(app, 5)
    delete_rows(app, chain, 5)
    with app.app_context():
        fourth = db.session.scalar(sa.select(AuditEvent.hash).where(AuditEvent.chain == chain, AuditEvent.seq == 4))
    set_head(app, chain, seq=4, hash=fourth)  # its MAC still covers row 5: only AUDIT_KEY could redo it
    assert_broken(app, row_id(app, chain, 4), "head's MAC does not verify")


def test_a_deleted_head_row_is_named(app):
    chain = write_rows(app, 3)
    with app.app_context():
        db.session.execute(sa.delete(AuditHead).where(AuditHead.chain == chain))
        db.session.commit()
    assert_broken(app, row_id(app, chain, 3), f"head row of chain {chain} is missing")


def test_a_row_moved_to_another_tenants_chain_is_named_in_both(app):
    acme = write_rows(app, 4)
    globex = write_rows(app, 2, "globex")
    moved = row_id(app, acme, 4)
    with app.app_context():  # re-parented, linked after globex's last row, globex's head moved onto it
        globex_last = db.session.scalar(sa.select(AuditEvent.hash).where(AuditEvent.chain == globex, AuditEvent.seq == 2))
        db.session.execute(
            sa.update(AuditEvent)
            .where(AuditEvent.id == moved)
            .values(chain=globex, tenant_id=globex, seq=3, prev_hash=globex_last)
        )
        db.session.commit()
        moved_hash = db.session.get(AuditEvent, moved).hash
    set_head(app, globex, seq=3, hash=moved_hash)
    with app.app_context():
        acme_verdict = str(audit_check.verify(acme))
        assert acme_verdict.startswith(f"audit chain broken at row {row_id(app, acme, 3)}: rows after row 3 were removed")
        assert str(audit_check.verify(globex)).startswith(f"audit chain broken at row {moved}: its content was changed")


def test_everything_rewritten_with_a_made_up_key_is_named(app):
    chain = write_rows(app, 4)
    relink(app, chain, key_id="0badc0ffee00")
    assert_broken(app, row_id(app, chain, 1), "made with key 0badc0ffee00")


def test_everything_rewritten_with_a_made_up_key_under_the_real_keys_name_is_named(app):
    chain = write_rows(app, 4)
    relink(app, chain)
    assert_broken(app, row_id(app, chain, 1), "content was changed")


# --- audit writes keep working without their head --------------------------------------------------


def test_a_deleted_head_is_rebuilt_on_the_next_write_which_is_recorded(app, alice, posts, handle_calls):
    chain = write_rows(app, 3)
    with app.app_context():
        db.session.execute(sa.delete(AuditHead).where(AuditHead.chain == chain))
        db.session.commit()
    approval, token = alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))
    response = alice.answer(approval, token)
    assert response.status_code == 200 and handle_calls["n"] == 1
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is None
        rebuilt = db.session.execute(
            sa.select(AuditEvent.seq, AuditEvent.detail).where(
                AuditEvent.chain == chain, AuditEvent.event == audit.HEAD_RECREATED
            )
        ).all()
    assert [tuple(r) for r in rebuilt] == [(4, "the head row was missing; rebuilt from row 3")]
    result = verify(app)
    assert result.exit_code == 0 and "its head was rebuilt 1 time(s)" in result.output


def test_a_head_rewound_to_an_old_signed_position_is_rebuilt_and_writes_go_on(app):
    chain = write_rows(app, 2)
    old = head_row(app, chain)  # a head the attacker saw once, with its valid MAC
    write_rows(app, 2)
    set_head(app, chain, **old)
    assert_broken(app, row_id(app, chain, 4), "head names row 2, behind")
    write_rows(app, 1)  # would collide with row 3 if the head were trusted
    with app.app_context():
        rebuilt = db.session.scalar(sa.select(AuditEvent.detail).where(AuditEvent.event == audit.HEAD_RECREATED))
    assert rebuilt == "the head named row 2 but the chain went on to row 4; rebuilt from row 4"
    assert verify(app).exit_code == 0


def test_a_head_with_a_forged_mac_is_rebuilt_on_the_next_write(app):
    chain = write_rows(app, 3)
    set_head(app, chain, mac="0" * 64)
    write_rows(app, 1)
    with app.app_context():
        rows = db.session.execute(
            sa.select(AuditEvent.seq, AuditEvent.event).where(AuditEvent.chain == chain).order_by(AuditEvent.seq)
        ).all()
    assert [tuple(r) for r in rows][3:] == [(4, audit.HEAD_RECREATED), (5, "approval.decided")]
    assert verify(app).exit_code == 0


# --- checkpoints: the cut end that a consistent head hides -----------------------------------------


def checkpoint(app):
    result = app.test_cli_runner().invoke(args=["audit", "checkpoint"])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def test_a_checkpoint_holds_while_the_chain_only_grows(app):
    write_rows(app, 3)
    write_rows(app, 1, "globex")
    line = checkpoint(app)
    assert line.startswith(audit.CHECKPOINT_PREFIX) and len(line.split()) == 3
    write_rows(app, 2)
    result = verify(app, "--against", line)
    assert result.exit_code == 0 and "checkpoint of 2 chain(s) holds" in result.output


def test_rows_cut_with_a_replayed_head_pass_verify_but_not_the_checkpoint(app):
    chain = write_rows(app, 3)
    old = head_row(app, chain)
    write_rows(app, 2)
    line = checkpoint(app)
    delete_rows(app, chain, 4, 5)
    set_head(app, chain, **old)  # consistent and signed: the chain alone cannot tell
    assert verify(app).exit_code == 0
    result = verify(app, "--against", line)
    assert result.exit_code == 1 and f"chain {chain} no longer has row 5" in result.output


def test_rows_cut_and_the_head_deleted_then_rebuilt_fail_the_checkpoint(app):
    chain = write_rows(app, 5)
    line = checkpoint(app)
    delete_rows(app, chain, 4, 5)
    with app.app_context():
        db.session.execute(sa.delete(AuditHead).where(AuditHead.chain == chain))
        db.session.commit()
    write_rows(app, 1)  # rebuilds the head on row 3: rows 4 and 5 are now other rows
    result = verify(app, "--against", line)
    assert result.exit_code == 1
    assert f"broken at row {row_id(app, chain, 5)}: row 5 of chain {chain} differs from the checkpoint" in result.output


def test_a_checkpoint_from_a_file_works_and_a_forged_or_garbled_one_is_refused(app, tmp_path):
    write_rows(app, 2)
    line = checkpoint(app)
    kept = tmp_path / "checkpoint.txt"
    kept.write_text(line + "\n")
    assert verify(app, "--against", str(kept)).exit_code == 0
    forged = line[:-1] + ("0" if line[-1] != "0" else "1")
    result = verify(app, "--against", forged)
    assert result.exit_code == 1 and "does not verify with any configured key" in result.output
    result = verify(app, "--against", "yesterday's lunch")
    assert result.exit_code != 0 and "not a checkpoint line, nor a file" in result.output
    result = verify(app, "--against", audit.CHECKPOINT_PREFIX + " 1:two:x:y")
    assert result.exit_code == 1 and "not a checkpoint" in result.output


def test_no_checkpoint_is_printed_for_a_broken_chain(app):
    chain = write_rows(app, 3)
    set_row(app, chain, 2, outcome="done")
    result = app.test_cli_runner().invoke(args=["audit", "checkpoint"])
    assert result.exit_code == 1 and audit.CHECKPOINT_PREFIX not in result.output
    assert f"broken at row {row_id(app, chain, 2)}" in result.output


# --- the admin page verifies from its mark ---------------------------------------------------------


@pytest.fixture
def admin(sign_in):
    return sign_in("admin@example.com")


@pytest.fixture
def counted_links(monkeypatch):
    """How many row links the verifier recomputes."""
    calls = {"n": 0}
    real = audit.link

    def counting(*args):
        calls["n"] += 1
        return real(*args)

    monkeypatch.setattr(audit, "link", counting)
    return calls


def chain_status(admin):
    page = admin.client.get("/admin/audit").get_data(as_text=True)
    start = page.index('class="chain')
    return page[start : page.index("</p>", start)]


def test_the_page_checks_only_rows_since_its_mark_and_a_window_of_older_ones(app, admin, counted_links, monkeypatch):
    monkeypatch.setattr(audit_check, "SWEEP_ROWS", 2)
    chain = write_rows(app, 30)
    counted_links["n"] = 0
    assert "The chain verifies (30 rows)" in chain_status(admin)  # no mark yet: a full walk
    assert counted_links["n"] == 30
    write_rows(app, 1)
    counted_links["n"] = 0
    assert "The chain verifies (31 rows)" in chain_status(admin)
    assert counted_links["n"] == 1 + 1 + 2  # the mark's row, the new row, two older rows
    with app.app_context():
        mark = db.session.get(AuditMark, chain)
        assert (mark.seq, mark.swept) == (31, 2)


def test_an_old_row_edited_behind_the_mark_is_found_by_the_rounds(app, admin, monkeypatch):
    monkeypatch.setattr(audit_check, "SWEEP_ROWS", 4)
    chain = write_rows(app, 12)
    assert "The chain verifies" in chain_status(admin)
    set_row(app, chain, 7, detail="edited behind the mark")
    seen = [chain_status(admin) for _ in range(3)]  # rounds 1-4, 5-8: found
    assert "The chain verifies" in seen[0]
    assert f"broken at row {row_id(app, chain, 7)}: its content was changed" in seen[1]


def test_a_forged_mark_means_a_full_walk(app, admin, monkeypatch):
    monkeypatch.setattr(audit_check, "SWEEP_ROWS", 1)
    chain = write_rows(app, 10)
    assert "The chain verifies" in chain_status(admin)
    set_row(app, chain, 6, detail="edited")
    with app.app_context():  # a mark claiming the round of older rows is already past row 6
        db.session.execute(sa.update(AuditMark).where(AuditMark.chain == chain).values(swept=7))
        db.session.commit()
    assert f"broken at row {row_id(app, chain, 6)}: its content was changed" in chain_status(admin)


def test_the_mark_catches_a_cut_end_with_a_replayed_head(app, admin):
    chain = write_rows(app, 3)
    old = head_row(app, chain)
    write_rows(app, 2)
    assert "The chain verifies (5 rows)" in chain_status(admin)
    delete_rows(app, chain, 4, 5)
    set_head(app, chain, **old)
    status = chain_status(admin)
    assert "The chain is broken" in status and "verified up to row 5 before: rows were cut from its end" in status
    assert verify(app).exit_code == 1  # and the command line holds the chain to the mark too


def test_a_tenants_whole_chain_deleted_is_named_by_its_mark_and_its_checkpoint(app, admin):
    chain = write_rows(app, 3)
    assert "The chain verifies (3 rows)" in chain_status(admin)
    line = checkpoint(app)
    with app.app_context():
        db.session.execute(sa.delete(AuditEvent).where(AuditEvent.chain == chain))
        db.session.execute(sa.delete(AuditHead).where(AuditHead.chain == chain))
        db.session.commit()
    assert f"chain {chain} ends at row 0, but it was verified up to row 3 before" in chain_status(admin)
    result = verify(app)
    assert result.exit_code == 1 and f"chain {chain} ends at row 0" in result.output
    with app.app_context():  # with the mark gone too (and no approval to tell: write_rows makes none),
        # only the checkpoint kept elsewhere still knows
        db.session.execute(sa.delete(AuditMark).where(AuditMark.chain == chain))
        db.session.commit()
    assert verify(app).exit_code == 0
    result = verify(app, "--against", line)
    assert result.exit_code == 1 and f"chain {chain} no longer has row 3" in result.output


def test_the_audit_api_reports_the_same_verdict(app):
    from app.auth import create_token
    from app.models import User
    from tests.conftest import api_headers

    chain = write_rows(app, 3)
    with app.app_context():
        token = create_token(db.session.scalar(sa.select(User).where(User.email == "admin@example.com")))
    client = app.test_client()
    assert client.get("/api/admin/audit", headers=api_headers(token)).get_json()["chain"]["ok"] is True
    delete_rows(app, chain, 3)
    reported = client.get("/api/admin/audit", headers=api_headers(token)).get_json()["chain"]
    assert reported["ok"] is False and "removed" in reported["reason"]


# --- a chain deleted whole, and rows no walk reaches ------------------------------------------------


def alices_cards(alice, posts, n=1):
    """n pending cards of alice's: each approval is written with its approval.created row."""
    return [alice.card(alice.say(alice.new_conversation(), f"/delete_post post={posts['Spring meetup']}"))[0] for _ in range(n)]


def delete_chain(app, chain):
    """What an attacker who can write the database does to hide a tenant's whole history."""
    with app.app_context():
        for table in (AuditEvent, AuditHead, AuditMark):
            db.session.execute(sa.delete(table).where(table.chain == chain))
        db.session.commit()


def test_a_tenants_whole_chain_deleted_with_its_mark_is_named_by_its_approvals(app, alice, posts):
    cards = alices_cards(alice, posts, 2)
    chain = tenant_id(app)
    assert verify(app).exit_code == 0
    delete_chain(app, chain)
    result = verify(app)  # the red-team run: "audit chain verifies: 0 rows", exit 0
    assert result.exit_code == 1, result.output
    assert f"the chain of tenant {chain} is missing: {len(cards)} approval(s) have no audit rows" in result.output
    with app.app_context():
        assert not audit_check.verify(chain).ok and audit_check.verify(tenant_id(app, "globex")).ok


def test_the_next_write_after_a_deleted_chain_says_so_and_verify_still_fails(app, alice, posts):
    first = alices_cards(alice, posts)[0]
    chain = tenant_id(app)
    delete_chain(app, chain)
    write_rows(app, 1)  # the next audited write begins a new chain
    with app.app_context():
        rows = db.session.execute(
            sa.select(AuditEvent.seq, AuditEvent.event, AuditEvent.detail)
            .where(AuditEvent.chain == chain)
            .order_by(AuditEvent.seq)
        ).all()
    assert [tuple(r) for r in rows][0] == (
        1,
        audit.HEAD_RECREATED,
        f"the chain was missing: 1 approval(s) of tenant {chain} have no audit rows; a new chain starts here",
    )
    result = verify(app)
    assert (
        result.exit_code == 1
        and f"1 approval(s) of tenant {chain} have no approval.created row in its chain (the first: {first})" in result.output
    ), result.output


def test_a_new_tenants_first_approval_begins_its_chain_without_a_false_alarm(app, alice, posts):
    alices_cards(alice, posts, 2)  # the first card's own approval is not evidence of an older chain
    with app.app_context():
        assert (
            db.session.scalar(sa.select(sa.func.count()).select_from(AuditEvent).where(AuditEvent.event == audit.HEAD_RECREATED))
            == 0
        )
    result = verify(app)
    assert result.exit_code == 0 and "head was rebuilt" not in result.output, result.output


def test_an_approvals_row_cut_from_the_end_with_a_replayed_head_is_named_by_cli_and_page(app, alice, posts, admin):
    chain = write_rows(app, 2)
    assert "The chain verifies (2 rows)" in chain_status(admin)  # the page's mark: row 2
    old = head_row(app, chain)
    card = alices_cards(alice, posts)[0]  # its approval.created row is row 3
    delete_rows(app, chain, 3)
    set_head(app, chain, **old)  # consistent and signed: the chain alone cannot tell
    result = verify(app)
    assert (
        result.exit_code == 1
        and f"1 approval(s) of tenant {chain} have no approval.created row in its chain (the first: {card})" in result.output
    ), result.output
    status = chain_status(admin)  # from its mark: the approvals made since it are held to their rows
    assert "The chain is broken" in status and f"(the first: {card})" in status, status


MADE_UP_PLACES = [(-7, 0), (0, 0), (999, 0), (-1, 0), (0, -1), ("acme", 0), ("acme", -3), (999, 1), (-7, 1)]


@pytest.mark.parametrize("chain, seq", MADE_UP_PLACES)
def test_a_made_up_row_no_walk_reaches_is_named(app, chain, seq):
    acme = write_rows(app, 2)
    with app.app_context():  # an honest row of no tenant too: chain 0 is a real chain
        audit.record("connector.refused", "unauthenticated_sender", tenant_id=None, user_id=None, channel="email")
        db.session.commit()
    assert verify(app).exit_code == 0
    chain = acme if chain == "acme" else chain
    with app.app_context():
        forged = AuditEvent(
            chain=chain,
            seq=seq,
            tenant_id=None,
            user_id=None,
            event="approval.decided",
            outcome="done",
            detail="approved by nobody",
            channel="web",
            key_id=audit.keyring().current,
            created_at=audit.utcnow(),
        )
        forged.hash = audit.link(MADE_UP, "", forged)
        db.session.add(forged)
        db.session.commit()
        forged_id = forged.id
    made_up = f"claims sequence {seq} in chain {chain}" if seq < 1 else f"in chain {chain}, which is neither 0 nor a tenant's"
    assert_broken(app, forged_id, made_up, "made up")


def test_a_made_up_row_before_a_tenants_chain_is_named_on_its_admin_page(app, admin):
    chain = write_rows(app, 2)
    assert "The chain verifies (2 rows)" in chain_status(admin)
    with app.app_context():
        db.session.add(
            AuditEvent(
                chain=chain,
                seq=0,
                tenant_id=chain,
                user_id=None,
                event="approval.decided",
                outcome="done",
                detail="",
                channel="web",
                created_at=audit.utcnow(),
            )
        )
        db.session.commit()
    status = chain_status(admin)
    assert "The chain is broken" in status and f"claims sequence 0 in chain {chain}" in status, status


# --- the CSV export and the page, with text a member chose -----------------------------------------

FORMULAS = [
    '=HYPERLINK("evil.example","y")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\t=1+1",
    "\r=1+1",
    " =1+1",
    "\u00a0=1+1",
    "\uff1d1+1",
    "\u200b=1+1",
    "\ufeff=1+1",
    "\u2060@SUM(A1)",
    " \u200d\u200b-1+1",
    "\u200e\uff0b1",
]  # invisible first


def member_chosen_ids(alice):
    """A member answers made-up approval ids: each refused attempt records the id from the URL."""
    for chosen in FORMULAS:
        response = alice.client.post(
            f"/approvals/{quote(chosen, safe='')}/confirm",
            data={"token": "x"},
            headers={"HX-Request": "true", "X-CSRFToken": alice.csrf},
        )
        assert response.status_code == 400, (chosen, response.status_code)


def test_every_csv_cell_a_member_can_reach_is_escaped(app, alice, admin):
    member_chosen_ids(alice)
    body = admin.client.get("/admin/audit.csv").get_data(as_text=True)
    rows = list(csv.reader(io.StringIO(body)))
    attempts = {row[5] for row in rows[1:] if row[3] == "approval.attempt"}
    assert attempts == {"'" + chosen for chosen in FORMULAS}  # each reached the export, each escaped
    for row in rows[1:]:
        for cell in row:
            assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r"), row
            visible = "".join(c for c in cell if not c.isspace() and unicodedata.category(c) != "Cf")
            assert visible[:1] not in ("=", "+", "-", "@", "\uff1d", "\uff0b"), row


@pytest.mark.parametrize(
    "cell, safe",
    [
        ("=1+1", "'=1+1"),
        ("-5", "'-5"),
        (" @x", "' @x"),
        ("\t1", "'\t1"),
        ("\r1", "'\r1"),
        ("\n=1", "'\n=1"),
        ("\uff0b1", "'\uff0b1"),
        ("alice@example.com", "alice@example.com"),
        (42, "42"),
        ("", ""),
        ("2026-11-30T10:00:00+00:00", "2026-11-30T10:00:00+00:00"),
        ("\u200b=1+1", "'\u200b=1+1"),
        ("\ufeff=1+1", "'\ufeff=1+1"),
        ("\u2060+1", "'\u2060+1"),
        (" \u200b\u00a0\ufeff@x", "' \u200b\u00a0\ufeff@x"),
        ("\u202e-1", "'\u202e-1"),
        ("\x01=1", "'\x01=1"),
        ("\u200bhello", "\u200bhello"),
        ("\u3164=1+1", "'\u3164=1+1"),
        ("\u034f=1+1", "'\u034f=1+1"),
        ("\u115f\ufe0f+1", "'\u115f\ufe0f+1"),
        ("\nhello", "'\nhello"),
        ("\n=1+1", "'\n=1+1"),
        ("\ufeff", "\ufeff"),
    ],
)
def test_csv_cells_are_escaped_by_the_owasp_rule(cell, safe):
    from app.admin import _csv_safe

    assert _csv_safe(cell) == safe


LOOK_ALIKES = {
    "\ufe62": "small plus",
    "\ufe63": "small hyphen-minus",
    "\ufe66": "small equals",
    "\ufe6b": "small at",
    "\uff0b": "full-width plus",
    "\uff0d": "full-width hyphen-minus",
    "\uff1d": "full-width equals",
    "\uff20": "full-width at",
    "\u2212": "minus sign",
}


@pytest.mark.parametrize("sign", list(LOOK_ALIKES), ids=list(LOOK_ALIKES.values()))
def test_a_cell_starting_with_a_look_alike_formula_sign_is_escaped_in_the_csv(app, admin, sign):
    with app.app_context():
        acme = db.session.scalar(sa.select(Tenant).where(Tenant.slug == "acme"))
        audit.record("approval.attempt", "refused_attempt", tenant_id=acme.id, user_id=None, detail=f"{sign}SUM(A1)")
        db.session.commit()
    rows = list(csv.reader(io.StringIO(admin.client.get("/admin/audit.csv").get_data(as_text=True))))
    assert [row[6] for row in rows[1:] if row[3] == "approval.attempt"] == [f"'{sign}SUM(A1)"]


def test_a_person_whose_email_starts_a_formula_is_escaped_in_the_csv(app, admin):
    from app.models import User

    with app.app_context():
        acme = db.session.scalar(sa.select(Tenant).where(Tenant.slug == "acme"))
        person = User(tenant_id=acme.id, email="=cmd|'/c calc'!a0@example.com", password_hash="x")
        db.session.add(person)
        db.session.flush()
        audit.record("approval.attempt", "refused_attempt", tenant_id=acme.id, user_id=person.id, detail="bad_token")
        db.session.commit()
    rows = list(csv.reader(io.StringIO(admin.client.get("/admin/audit.csv").get_data(as_text=True))))
    assert rows[1][2] == "'=cmd|'/c calc'!a0@example.com"


def test_a_member_chosen_approval_id_is_plain_text_on_the_audit_page(app, alice, admin):
    response = alice.client.post(
        f"/approvals/{quote('<img src=x onerror=alert(1)>', safe='')}/confirm",
        data={"token": "x"},
        headers={"HX-Request": "true", "X-CSRFToken": alice.csrf},
    )
    assert response.status_code == 400
    page = admin.client.get("/admin/audit").get_data(as_text=True)
    assert "<code>&lt;img src</code>" in page and "<img src" not in page


def test_audit_page_links_carry_only_its_filters(app, admin):
    write_rows(app, 60)  # two pages, so the page links to the next
    for query in ("?after=55", "?_method=DELETE", "?_external=1&_anchor=x", "?event=approval.decided&after=55"):
        response = admin.client.get(f"/admin/audit{query}")
        assert response.status_code == 200, (query, response.status_code)
        links = re.findall(r'href="(/admin/audit[^"]*)"', response.get_data(as_text=True))
        assert links and not any("_method" in link or "_external" in link or "#" in link for link in links), links
        assert all(link.count("after=") <= 1 for link in links), links
    page = admin.client.get("/admin/audit?event=approval.decided&after=55").get_data(as_text=True)
    assert 'href="/admin/audit.csv?event=approval.decided"' in page  # the export: every page of the filter
