"""flask approvals: housekeeping (expire overdue cards, end dead claims and dead workers' turns)."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from app.copilot import expire_due, sweep_interrupted

approvals_cli = AppGroup("approvals", help="Housekeeping for approvals.")


@approvals_cli.command("sweep")
@click.option(
    "--interrupted-after", type=int, default=None, help="Seconds a claimed approval may run before it counts as interrupted."
)
def sweep(interrupted_after: int | None) -> None:
    """Expire overdue cards, end dead claims as interrupted and tell the waiting runs; end the
    turns of dead workers as interrupted (with Retry)."""
    from app.copilot import sweep_dead

    grace = interrupted_after if interrupted_after is not None else current_app.config["APPROVALS_INTERRUPTED_AFTER"]
    expired = expire_due()
    interrupted = sweep_interrupted(grace)
    dead = sweep_dead(current_app.config["TURN_DEAD_AFTER"])
    click.echo(f"expired {len(expired)}, interrupted {len(interrupted)}, turns interrupted {len(dead)}")
