"""How many approvals may wait at once (DESIGN §3.1): a run holds only a few pending cards and
forms, a person only so many across their runs, and her agents only so many of their own, so a
runaway agent can neither flood her nor use up what she may ask for herself."""

from __future__ import annotations

import sqlalchemy as sa
from flask import current_app

from app.copilot import audit
from app.copilot.actions import Action, ActionContext
from app.errors import TooManyPending
from app.extensions import db
from app.models import Approval, Run, utcnow
from app.status import Status


def check_cap(ctx: ActionContext, run: Run, action: type[Action]) -> None:
    """Raise TooManyPending (audited) when the run already holds its share of pending approvals,
    or its asker does across all the person's runs (an agent starting run after run cannot flood
    them). The person's own requests and her agents' are counted apart: her agents together have a
    cap of their own, so an agent that fills it leaves her own requests working."""
    pending = sa.select(sa.func.count()).select_from(Approval).where(Approval.status == Status.PENDING)
    in_run = db.session.scalar(pending.where(Approval.run_id == run.id)) or 0
    if in_run >= int(current_app.config["APPROVALS_MAX_PENDING_PER_RUN"]):
        why = f"run {run.id} already holds {in_run} pending"
    else:
        by_agent = bool(run.agent)
        mine = (
            db.session.scalar(
                pending.where(
                    Approval.user_id == ctx.user.id,
                    Approval.expires_at > utcnow(),
                    Approval.requested_by_agent.is_(by_agent),
                )
            )
            or 0
        )
        cap = "APPROVALS_MAX_PENDING_FROM_AGENTS" if by_agent else "APPROVALS_MAX_PENDING_PER_PERSON"
        if mine < int(current_app.config[cap]):
            return
        why = f"the person's agents already have {mine} pending" if by_agent else f"the person already has {mine} pending"
    audit.record(
        "approval.create",
        "refused_cap",
        tenant_id=ctx.tenant.id,
        user_id=ctx.user.id,
        detail=f"{action.name}: {why}",
        channel=ctx.channel,
    )
    raise TooManyPending()
