"""A process that dies between claim and finish: the approval ends `interrupted`, never re-run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import sqlalchemy as sa

from app.copilot import sweep_interrupted
from app.extensions import db
from app.models import Approval, Message, Post, utcnow
from tests.conftest import REDIS_URL

DIE_INSIDE_HANDLE = textwrap.dedent("""
    import os, sys
    from app import create_app
    from app.actions.delete_post import DeletePost
    from app.copilot import answer
    from app.copilot.approvals import Actor
    from app.extensions import db
    from app.models import Approval, User

    def die(self, ctx, input):
        os._exit(9)  # the worker is killed mid-handle(): no cleanup, no commit

    DeletePost.handle = die
    app = create_app({"COUNTERSIGN_ENV": "testing", "SECRET_KEY": "test-secret-key",
                      "SQLALCHEMY_DATABASE_URI": sys.argv[1], "REDIS_URL": sys.argv[2],
                      "SWEEP_ON_START": False})
    with app.app_context():
        approval = db.session.get(Approval, sys.argv[3])
        user = db.session.get(User, approval.user_id)
        answer(approval.id, sys.argv[4], Actor(user=user, binding=sys.argv[5]), "confirm")
""")


def test_process_dying_mid_handle_ends_interrupted_and_never_reruns(app, database_url, alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval_id, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    with alice.client.session_transaction() as session:
        binding = f"web:{session['sid']}"
    died = subprocess.run(
        [sys.executable, "-c", DIE_INSIDE_HANDLE, database_url, REDIS_URL, approval_id, token, binding],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert died.returncode == 9, died.stderr
    with app.app_context():
        assert db.session.get(Approval, approval_id).status == "running"  # claimed, unfinished
        ended = sweep_interrupted(older_than_seconds=0)
        assert [a.id for a in ended] == [approval_id]
        assert db.session.get(Approval, approval_id).status == "interrupted"
        assert db.session.get(Post, posts["Spring meetup"]) is not None  # handle's work never committed
        told = db.session.scalars(
            sa.select(Message.text).where(Message.conversation_id == convo, Message.role == "assistant")
        ).all()
        assert told[-1].startswith("Interrupted: the server stopped while this ran.")
    again = alice.answer(approval_id, token)
    assert again.status_code == 409
    assert handle_calls["n"] == 0
    assert "Interrupted — not run again" in again.get_data(as_text=True)


def test_sweep_leaves_recent_claims_alone(app, alice, posts):
    convo = alice.new_conversation()
    approval_id, _ = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    with app.app_context():
        db.session.execute(sa.update(Approval).values(status="running", claimed_at=utcnow()))
        db.session.commit()
        assert sweep_interrupted(older_than_seconds=600) == []
        assert db.session.get(Approval, approval_id).status == "running"
