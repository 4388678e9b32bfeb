"""flask worker: the process that runs turns and connector deliveries from Redis."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("worker")
@click.option(
    "--threads", type=int, default=None, help="Turns run at once (default WORKER_THREADS); each waits on the worker's event loop."
)
@click.option("--burst", is_flag=True, help="Work until the queues are empty, then stop.")
@with_appcontext
def worker(threads: int | None, burst: bool) -> None:
    """Run turns and connector deliveries from Redis (Dramatiq) until stopped (needs REDIS_URL)."""
    from app import copilot

    if not current_app.config.get("REDIS_URL"):
        raise click.ClickException("Set REDIS_URL: without it, turns run in the web process's own pool.")
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    threads = threads or current_app.config["WORKER_THREADS"]
    if burst:
        copilot.drain(app, threads)
    else:
        copilot.worker(app, threads)
