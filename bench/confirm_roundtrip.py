"""P1: the confirm round trip (verify, claim, authorize, rebuild, handle, resume the run)
against a one-INSERT endpoint of the same app, both under gunicorn, alternating A/B in one run.

    python bench/confirm_roundtrip.py [--n 200] [--database-url URL] [--json]
"""

from __future__ import annotations

from _harness import Client, compare, env_for, gunicorn, main, prepare, seed_posts


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
    return compare("insert", "confirm", baseline, confirm, database_url)


if __name__ == "__main__":
    main(run, "P1 confirm round trip vs one INSERT", "insert", "confirm", __doc__)
