"""P2 (part): the admin's pending list with 1k and with 100k approval rows in the tenant,
first page, under gunicorn, alternating A/B in one run.

    python bench/admin_list.py [--n 200] [--small 1000] [--large 100000] [--database-url URL] [--json]
"""

from __future__ import annotations

import json
import subprocess
import sys

from _harness import ROOT, compare, env_for, gunicorn, main, prepare

SEED = """
import sys
from datetime import timedelta
import sqlalchemy as sa
from app import create_app
from app.auth import create_token
from app.extensions import db
from app.models import Approval, Conversation, Run, Tenant, User, utcnow

app = create_app()
with app.app_context():
    out = []
    for slug, n in (("small", int(sys.argv[1])), ("large", int(sys.argv[2]))):
        tenant = Tenant(slug=slug, name=slug)
        db.session.add(tenant)
        db.session.flush()
        person = User(tenant_id=tenant.id, email=f"person@{slug}.example")
        admin = User(tenant_id=tenant.id, email=f"admin@{slug}.example", is_admin=True)
        db.session.add_all([person, admin])
        db.session.flush()
        convo = Conversation(tenant_id=tenant.id, user_id=person.id)
        db.session.add(convo)
        db.session.flush()
        run = Run(conversation_id=convo.id, status="paused")
        db.session.add(run)
        db.session.flush()
        now = utcnow()
        for start in range(0, n, 10000):
            db.session.execute(sa.insert(Approval), [{
                "id": f"{slug[0]}{i:031x}", "tenant_id": tenant.id, "user_id": person.id, "run_id": run.id,
                "conversation_id": convo.id, "tool_call_id": f"c{i}", "step": 1, "action": "delete_post",
                "type": "confirm", "arguments": {"post": i}, "reason": "Delete this post? This cannot be undone.",
                "rows": [{"label": "Post", "value": f"Post {i}"}, {"label": "Status", "value": "draft"}],
                "digest": "0" * 64, "status": "pending" if i % 2 == 0 else "declined",
                "created_at": now - timedelta(seconds=n - i), "expires_at": now + timedelta(hours=2),
                "decided_at": None if i % 2 == 0 else now - timedelta(seconds=(n - i) // 2),
            } for i in range(start, min(n, start + 10000))])
        db.session.commit()
        out.append(create_token(admin))
    print(" ".join(out))
"""


DASHBOARD = """
import statistics, sys, time
import sqlalchemy as sa
from app import create_app
from app.copilot import review
from app.extensions import db
from app.models import Tenant
app = create_app()
with app.app_context():
    ids = {t.slug: t.id for t in db.session.scalars(sa.select(Tenant).where(Tenant.slug.in_(["small", "large"])))}
    times = {"small": [], "large": []}
    for i in range(int(sys.argv[1])):
        for name in (("small", "large") if i % 2 == 0 else ("large", "small")):
            start = time.perf_counter()
            review.dashboard(ids[name])
            times[name].append(time.perf_counter() - start)
    print(statistics.median(times["small"]) * 1000, statistics.median(times["large"]) * 1000)
"""


def run(n: int, database_url: str, small: int = 1_000, large: int = 100_000) -> dict[str, object]:
    env = env_for(database_url)
    prepare(database_url, env)
    tokens = subprocess.run([sys.executable, "-c", SEED, str(small), str(large)], cwd=ROOT, env=env,
                            check=True, capture_output=True, text=True).stdout.split()[-2:]
    import http.client
    import time

    with gunicorn(env) as port:
        conns = {name: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for name in ("small", "large")}
        heads = {name: {"Authorization": f"Bearer {tok}"} for name, tok in zip(("small", "large"), tokens, strict=True)}
        times: dict[str, list[float]] = {"small": [], "large": []}
        for i in range(n + 10):
            for name in (("small", "large") if i % 2 == 0 else ("large", "small")):
                start = time.perf_counter()
                conns[name].request("GET", "/api/admin/approvals?status=pending", headers=heads[name])
                response = conns[name].getresponse()
                body = response.read()
                elapsed = time.perf_counter() - start
                assert response.status == 200 and len(json.loads(body)["approvals"]) == 50, body[:200]
                if i >= 10:  # the first ten are warm-up
                    times[name].append(elapsed)
    dash = subprocess.run([sys.executable, "-c", DASHBOARD, "30"], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout.split()[-2:]
    return {**compare("rows_1k", "rows_100k", times["small"], times["large"], database_url),
            "dashboard_ms": {"rows_1k": float(dash[0]), "rows_100k": float(dash[1])}}


def report() -> None:
    result = main(run, "P2 admin pending list, first page of 50", "rows_1k", "rows_100k", __doc__,
                  small=1_000, large=100_000)
    if "dashboard_ms" in result and not sys.argv.count("--json"):
        d = result["dashboard_ms"]
        print(f"  dashboard figures (in process, median of 30): 1k {d['rows_1k']:.1f} ms, 100k {d['rows_100k']:.1f} ms")


if __name__ == "__main__":
    report()
