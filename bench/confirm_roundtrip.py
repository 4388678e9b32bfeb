"""P1: the confirm round trip (verify, claim, authorize, rebuild, handle, resume the run)
against a one-INSERT endpoint of the same app, both under gunicorn, alternating A/B in one run.

    python bench/confirm_roundtrip.py [--n 200] [--database-url URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from _harness import Client, env_for, gunicorn, prepare, seed_posts, summary, temp_sqlite


def run(n: int, database_url: str) -> dict[str, object]:
    env = env_for(database_url)
    token = prepare(database_url, env)
    with gunicorn(env) as port:
        client = Client(port, token)
        prompts = []
        for post in seed_posts(env, n):  # not timed: n pending cards, each for its own post
            _, convo, _ = client.post("/api/conversations")
            _, body, _ = client.post(f"/api/conversations/{convo['id']}/messages", {"text": f"/delete_post post={post}"})
            prompts.append(body["pending"][0])
        for _ in range(20):  # warm both paths up
            client.post("/api/_probe/insert")
        baseline, confirm = [], []
        for i, prompt in enumerate(prompts):
            order = ("probe", "confirm") if i % 2 == 0 else ("confirm", "probe")
            for which in order:
                if which == "probe":
                    status, _, t = client.post("/api/_probe/insert")
                    baseline.append(t)
                else:
                    status, body, t = client.post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]})
                    confirm.append(t)
                assert status == 200, (which, status, body)
    base, conf = summary(baseline), summary(confirm)
    return {
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "n": len(confirm),
        "insert": base,
        "confirm": conf,
        "ratio_median": conf["median_ms"] / base["median_ms"],
        "ratio_p99": conf["p99_ms"] / base["p99_ms"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.n, args.database_url or temp_sqlite())
    if args.json:
        print(json.dumps(result))
        return
    print(f"P1 confirm round trip vs one INSERT ({result['database']}, n={result['n']}, gunicorn -w 2)")
    for name in ("insert", "confirm"):
        s = result[name]
        print(f"  {name:<8} median {s['median_ms']:.2f} ms   p99 {s['p99_ms']:.2f} ms")
    print(f"  ratio    median {result['ratio_median']:.2f}x   p99 {result['ratio_p99']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
