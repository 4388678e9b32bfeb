"""P2 (part): the admin's pending list with 1k and with 100k approval rows in the tenant,
first page, under gunicorn, alternating A/B in one run.

    python bench/admin_list.py [--n 200] [--small 1000] [--large 100000] [--database-url URL] [--json]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from _harness import ROOT, compare, env_for, gunicorn, insert_approvals, main, prepare


def seed(env: dict[str, str], small: int, large: int) -> list[str]:
    """Two tenants, each with a person whose cards are half pending, half declined, and an admin;
    returns the admins' API tokens."""
    os.environ.update(env)
    from app import create_app
    from app.auth import create_token
    from app.extensions import db
    from app.models import Tenant, User

    with create_app({"SWEEP_ON_START": False}).app_context():
        tokens = []
        for slug, n in (("small", small), ("large", large)):
            tenant = Tenant(slug=slug, name=slug)
            db.session.add(tenant)
            db.session.flush()
            person = User(tenant_id=tenant.id, email=f"person@{slug}.example")
            admin = User(tenant_id=tenant.id, email=f"admin@{slug}.example", is_admin=True)
            db.session.add_all([person, admin])
            db.session.flush()
            insert_approvals(person, n, slug[0], declined=lambda i: i % 2 == 1)
            tokens.append(create_token(admin))
        return tokens


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
    tokens = seed(env, small, large)
    import http.client
    import time

    with gunicorn(env) as port:
        conns = {name: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for name in ("small", "large")}
        heads = {name: {"Authorization": f"Bearer {tok}"} for name, tok in zip(("small", "large"), tokens, strict=True)}
        times: dict[str, list[float]] = {"small": [], "large": []}
        for i in range(n + 10):
            for name in ("small", "large") if i % 2 == 0 else ("large", "small"):
                start = time.perf_counter()
                conns[name].request("GET", "/api/admin/approvals?status=pending", headers=heads[name])
                response = conns[name].getresponse()
                body = response.read()
                elapsed = time.perf_counter() - start
                assert response.status == 200 and len(json.loads(body)["approvals"]) == 50, body[:200]
                if i >= 10:  # the first ten are warm-up
                    times[name].append(elapsed)
    dash = subprocess.run(
        [sys.executable, "-c", DASHBOARD, "30"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.split()[-2:]
    return {
        **compare("rows_1k", "rows_100k", times["small"], times["large"], database_url),
        "dashboard_ms": {"rows_1k": float(dash[0]), "rows_100k": float(dash[1])},
    }


def report() -> None:
    result = main(run, "P2 admin pending list, first page of 50", "rows_1k", "rows_100k", __doc__, small=1_000, large=100_000)
    if "dashboard_ms" in result and not sys.argv.count("--json"):
        d = result["dashboard_ms"]
        print(f"  dashboard figures (in process, median of 30): 1k {d['rows_1k']:.1f} ms, 100k {d['rows_100k']:.1f} ms")


if __name__ == "__main__":
    report()
