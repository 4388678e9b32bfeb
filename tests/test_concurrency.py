"""At most once: 32 confirms of one card at the same moment, 20 times over."""

from __future__ import annotations

import threading

import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Post, User
from tests.conftest import api_headers

THREADS = 32
TRIALS = 20


def test_32_simultaneous_confirms_run_handle_exactly_once(app, posts, handle_calls):
    with app.app_context():
        alice = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        alice_id, tenant_id = alice.id, alice.tenant_id
        headers = api_headers(create_token(alice, scope="client"))
    client = app.test_client()
    for trial in range(TRIALS):
        before = handle_calls["n"]
        convo = client.post("/api/conversations", json={}, headers=headers).get_json()["id"]
        title = f"Trial {trial}"
        with app.app_context():
            post = Post(tenant_id=tenant_id, author_id=alice_id, title=title)
            db.session.add(post)
            db.session.commit()
            post_id = post.id
        body = client.post(
            f"/api/conversations/{convo}/messages", json={"text": f"/delete_post post={post_id}"}, headers=headers
        ).get_json()
        (prompt,) = body["pending"]
        start = threading.Barrier(THREADS)
        statuses: list[int] = []
        lock = threading.Lock()

        def press(start=start, prompt=prompt, statuses=statuses, lock=lock) -> None:
            own = app.test_client()
            start.wait()
            response = own.post(f"/api/approvals/{prompt['id']}/confirm", json={"token": prompt["token"]}, headers=headers)
            with lock:
                statuses.append(response.status_code)

        threads = [threading.Thread(target=press) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert handle_calls["n"] - before == 1, f"trial {trial}: handle ran {handle_calls['n'] - before} times"
        assert sorted(statuses) == [200] + [409] * (THREADS - 1), f"trial {trial}: {sorted(statuses)}"
