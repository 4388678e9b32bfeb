"""flask audit: verify the audit chains, and print a checkpoint to verify them against later."""

from __future__ import annotations

from pathlib import Path

import click
from flask.cli import AppGroup

audit_cli = AppGroup("audit", help="The audit log.")


@audit_cli.command("verify")
@click.option(
    "--against",
    "checkpoint",
    metavar="CHECKPOINT",
    help="A line `audit checkpoint` printed (or a file holding it): fail unless every chain still holds it.",
)
def audit_verify(checkpoint: str | None) -> None:
    """Walk every tenant's audit chain; name the first broken row (exit 1) or say it verifies."""
    from app.copilot.audit import CHECKPOINT_PREFIX, verify, verify_against

    verdict = verify()
    click.echo(str(verdict))
    if verdict.ok and checkpoint is not None:
        line = checkpoint if checkpoint.startswith(CHECKPOINT_PREFIX) else _read(checkpoint)
        verdict = verify_against(line)
        click.echo(f"checkpoint of {verdict.rows} chain(s) holds" if verdict.ok else str(verdict))
    if not verdict.ok:
        raise SystemExit(1)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as error:
        raise click.ClickException(f"--against: not a checkpoint line, nor a file holding one ({error.strerror}).") from None


@audit_cli.command("checkpoint")
def audit_checkpoint() -> None:
    """Print every chain's head (chain:seq:hash:mac) as one line to keep elsewhere, for `verify --against`;
    refuses (exit 1) while a chain does not verify."""
    from app.copilot.audit import checkpoint, verify

    verdict = verify()
    if not verdict.ok:
        click.echo(f"no checkpoint: {verdict}", err=True)
        raise SystemExit(1)
    click.echo(checkpoint())
