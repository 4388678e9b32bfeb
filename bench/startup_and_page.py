"""P4: create_app() time (median of fresh interpreter runs) against `import flask` alone in the same
run; what a fresh process's first turn takes beyond its second (pydantic-ai is imported then, not
at start); and the chat page's bytes over the wire (HTML + CSS + JS as the app sends them to a
browser that accepts gzip: the assets compressed, the page itself not).

    python bench/startup_and_page.py [--n 5] [--json]
"""

from __future__ import annotations

import gzip
import json
import statistics
import subprocess
import sys

from _harness import ROOT

CREATE = "import time; t = time.perf_counter(); from app import create_app; create_app(); print(time.perf_counter() - t)"
BASE = "import time; t = time.perf_counter(); import flask; flask.Flask('x'); print(time.perf_counter() - t)"
# Two turns with the offline model, run inline, each in a new conversation: the first's time less
# the second's.
TURNS = """
import time
from app import create_app
from app.cli import seed_demo
from app import copilot
from app.extensions import db
from app.models import Conversation
app = create_app({"TURNS_RUNNER": "inline"})
with app.app_context():
    db.create_all()
    alice = seed_demo()["alice@example.com"]
    took = []
    for _ in range(2):
        conversation = Conversation(tenant_id=alice.tenant_id, user_id=alice.id)
        db.session.add(conversation)
        db.session.commit()
        t = time.perf_counter()
        copilot.send_message(conversation, copilot.person(alice, "web"), "/list_posts")
        took.append(time.perf_counter() - t)
print(took[0] - took[1])
"""


def timed(code: str) -> float:
    env = {
        "COUNTERSIGN_ENV": "testing",
        "SECRET_KEY": "bench",
        "SWEEP_ON_START": "0",
        "DATABASE_URL": "sqlite:///:memory:",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def page_bytes() -> dict[str, int]:
    from app import create_app
    from app.cli import seed_demo
    from app.extensions import db

    app = create_app(
        {
            "COUNTERSIGN_ENV": "testing",
            "SECRET_KEY": "bench",
            "SWEEP_ON_START": False,
            "SQLALCHEMY_DATABASE_URI": "sqlite:///:memory:",
            "RATELIMIT_ENABLED": False,
            "SESSION_COOKIE_SECURE": False,
        }
    )
    with app.app_context():
        db.create_all()
        seed_demo()
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    import re

    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    client.post("/login", data={"email": "alice@example.com", "password": "demo", "csrf_token": csrf})
    convo = client.post(
        "/conversations",
        headers={"X-CSRFToken": re.search(r'"X-CSRFToken": "([^"]+)"', client.get("/").get_data(as_text=True)).group(1)},
    )  # type: ignore[union-attr]
    gz = {"Accept-Encoding": "gzip"}
    page = client.get(convo.headers["Location"], headers=gz)
    assets = [client.get(p, headers=gz) for p in ("/static/app.css", "/static/app.js", "/static/vendor/htmx.min.js")]
    wire = sum(len(r.get_data()) for r in (page, *assets))  # the bodies as sent: assets gzipped, the page not
    plain = [page.get_data()] + [
        gzip.decompress(r.get_data()) if r.headers.get("Content-Encoding") == "gzip" else r.get_data() for r in assets
    ]
    return {"raw": sum(len(b) for b in plain), "wire": wire, "all_gzip": sum(len(gzip.compress(b)) for b in plain)}


def run(n: int) -> dict[str, object]:
    create, base = [], []
    for i in range(n):
        for which in ("create", "base") if i % 2 == 0 else ("base", "create"):
            (create if which == "create" else base).append(timed(CREATE if which == "create" else BASE))
    first_turn = [timed(TURNS) for _ in range(n)]
    return {
        "create_app_s": statistics.median(create),
        "flask_only_s": statistics.median(base),
        "first_turn_extra_s": statistics.median(first_turn),
        "page_bytes": page_bytes(),
    }


if __name__ == "__main__":
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 5
    result = run(n)
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        print(
            f"P4 create_app() median {result['create_app_s'] * 1000:.0f} ms (import flask alone "
            f"{result['flask_only_s'] * 1000:.0f} ms); a first turn takes "
            f"{result['first_turn_extra_s'] * 1000:.0f} ms more than the second; chat page "
            f"{result['page_bytes']['raw'] / 1024:.1f} KB raw, {result['page_bytes']['wire'] / 1024:.1f} KB over the wire"
        )
