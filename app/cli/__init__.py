"""flask commands: demo, actions, users (tokens, sessions), approvals sweep.

One module per group of commands; this one registers them on the app."""

from __future__ import annotations

from flask import Flask

from app.cli import actions, approvals, audit, connectors, demo, mcp, users, worker
from app.cli.demo import DEMO_PASSWORD, seed_demo

__all__ = ["DEMO_PASSWORD", "register", "seed_demo"]


def register(app: Flask) -> None:
    app.cli.add_command(demo.demo)
    app.cli.add_command(actions.actions)
    app.cli.add_command(users.users)
    app.cli.add_command(approvals.approvals_cli)
    app.cli.add_command(audit.audit_cli)
    app.cli.add_command(connectors.connectors_cli)
    app.cli.add_command(worker.worker)
    app.cli.add_command(mcp.mcp_command)
