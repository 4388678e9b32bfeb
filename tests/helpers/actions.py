"""An app on the tests' database with another package of actions (the `flask actions` commands)."""

from __future__ import annotations

from app import create_app


def cli_app(database_url, package):
    return create_app(
        {
            "COUNTERSIGN_ENV": "testing",
            "SECRET_KEY": "k",
            "SWEEP_ON_START": False,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "ACTIONS_PACKAGE": package,
        }
    )
