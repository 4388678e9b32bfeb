"""The admin console: pending approvals of the tenant, revoke, the audit log and its chain."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from typing import Any
from urllib.parse import urlencode

from flask import Response, abort, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app import copilot
from app.admin.blueprint import bp
from app.admin.chart import decisions_legend, decisions_svg
from app.auth import current_actor
from app.copilot import approvals, audit, review
from app.copilot.approvals import REASON_MAX, Actor
from app.copilot.hidden import HIDDEN_STRICT
from app.errors import CountersignError
from app.routing import safe_target
from app.status import Status


@bp.before_request
@login_required
def admins_only() -> None:
    """Everyone but an admin of their tenant gets 403; every query below is tenant-scoped."""
    if not current_user.is_admin:
        abort(403)


@bp.get("/")
def index() -> Any:
    """Dashboard and the approvals table (pending by default), newest first."""
    actor = current_actor("admin")
    stats = review.dashboard(actor.user.tenant_id)
    return render_template(
        "admin/index.html",
        **console(actor, stats),
        chart=decisions_svg(stats),
        legend=decisions_legend(stats),
        actions=sorted(copilot.engine().registry.actions),
        statuses=list(Status),
    )


@bp.get("/live")
def live() -> Any:
    """The console's live parts, polled by the page every ADMIN_POLL seconds (htmx `every 5s` by default): the
    counts, the countersignature queue and the table, or 204 (no swap) when none has changed
    since the page's `seen`. Polling, not a stream: nothing to hold open per admin, it survives
    any restart or proxy, it needs no event of its own (a card decided anywhere, by anyone, or a
    sweep, shows in the next poll), and a few seconds is soon enough for a console."""
    actor = current_actor("admin")
    shown = console(actor, review.dashboard(actor.user.tenant_id))
    if request.args.get("seen") == shown["seen"]:
        return "", 204
    response = make_response(render_template("admin/_live.html", **shown, oob=True))
    response.headers["Vary"] = "HX-Request"
    return response


def console(actor: Actor, stats: review.Dashboard) -> dict[str, Any]:
    """What the console's live parts show (filtered by the query string), and `seen`: a digest
    of it, which the next poll sends back."""
    tenant_id = actor.user.tenant_id
    filters = review.filters_from(request.args)
    page = review.approvals(tenant_id, filters, request.args.get("after"))
    waiting = countersign_queue(actor)
    state = (stats.pending, stats.countersigning, sorted(stats.decided_today.items()), [(a.id, a.status) for a in page.rows])
    seen = hashlib.sha256(repr((state, [c["prompt"].id for c in waiting])).encode()).hexdigest()[:16]
    args = {**{k: v for k, v in request.args.items() if k != "seen"}, "seen": seen}
    return {
        "waiting": waiting,
        "page": page,
        "filters": filters,
        "stats": stats,
        "people": review.people(tenant_id),
        "seen": seen,
        "live_url": f"{url_for('admin.live')}?{urlencode(args)}",
    }


def countersign_queue(actor: Actor) -> list[dict[str, Any]]:
    """The cards waiting for this admin's countersignature, as partials/_card.html shows them:
    each the engine's Prompt for this session, with its countersignature token (answered at
    web.countersign)."""
    return [
        {"prompt": approvals.prompt_for(approval, actor), "reason_max": REASON_MAX}
        for approval in approvals.waiting_for(actor.user, copilot.engine().registry)
    ]


@bp.post("/approvals/<approval_id>/revoke")
def revoke(approval_id: str) -> Any:
    """Revoke a pending approval: it ends `revoked`, nothing runs, the model is told."""
    actor = current_actor("admin")
    try:
        copilot.revoke(approval_id, actor.user)
    except CountersignError as error:
        if error.status == 404:
            raise
        return make_response(render_template("error.html", message=error.message), error.status)
    return redirect(safe_target(request.referrer, within="/admin") or url_for("admin.index"))


@bp.get("/audit")
def audit_log() -> Any:
    """The audit log, filtered, with whether its chain verifies."""
    actor = current_actor("admin")
    tenant_id = actor.user.tenant_id
    verdict = audit.verify_since_mark(tenant_id)  # first: it commits its mark, which expires loaded rows
    filters = review.audit_filters_from(request.args)
    page = review.audit_rows(tenant_id, filters, cursor=request.args.get("after"))
    # Links carry the filters only: never the request's own keys (`after` twice, or url_for's `_method`).
    return render_template(
        "admin/audit.html",
        page=page,
        people=review.people(tenant_id),
        verdict=verdict,
        args={k: v for k, v in filters.items() if v},
    )


@bp.get("/audit.csv")
def audit_csv() -> Response:
    """The filtered audit log as CSV (every page)."""
    actor = current_actor("admin")
    tenant_id = actor.user.tenant_id
    people = review.people(tenant_id)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["seq", "when", "person", "event", "outcome", "approval", "detail", "channel", "hash"])
    cursor = None
    while True:
        page = review.audit_rows(tenant_id, review.audit_filters_from(request.args), cursor=cursor, limit=1000)
        for row in page.rows:
            writer.writerow(
                [
                    _csv_safe(cell)
                    for cell in (
                        row.seq,
                        row.created_at.isoformat(),
                        people.get(row.user_id, ""),
                        row.event,
                        row.outcome,
                        row.approval_id or "",
                        with_emails(row.detail, people),
                        row.channel,
                        row.hash,
                    )
                ]
            )
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    return Response(out.getvalue(), mimetype="text/csv", headers={"Content-Disposition": "attachment; filename=audit.csv"})


USER_ID = re.compile(r"\buser (\d+)\b")


@bp.app_template_filter("with_emails")
def with_emails(detail: str, people: dict[int, str]) -> str:
    """An audit row's detail with each "user 3" in it as that person's email: the chain keeps ids
    (an email can change), an admin reads people."""
    return USER_ID.sub(lambda m: people.get(int(m[1]), m[0]), detail)


# A spreadsheet may fold a look-alike sign to the one it reads as a formula: the full-width and small
# forms of = + - @ (U+FF1D, U+FF0B, U+FF0D, U+FF20, U+FE66, U+FE62, U+FE63, U+FE6B) are these after
# NFKC, and the minus sign (U+2212), which NFKC keeps, starts a formula in some spreadsheets too.
FORMULA_STARTS = ("=", "+", "-", "@", "\u2212")


def _csv_safe(value: object) -> str:
    """Keep a spreadsheet from reading a cell as a formula (OWASP's CSV-injection rule, on every
    cell): a cell that starts with = + - @ or a look-alike of one (FORMULA_STARTS), a tab, a CR or
    an LF, or with one of those signs after leading whitespace and hidden characters (a BOM,
    zero-width spaces and joiners, Hangul fillers, the combining grapheme joiner: every character
    app/copilot/hidden.py counts as hidden, which a spreadsheet may drop), gets a leading apostrophe."""
    text = str(value)
    if text[:1] in ("\t", "\r", "\n") or unicodedata.normalize("NFKC", _visible_start(text))[:1] in FORMULA_STARTS:
        return "'" + text
    return text


def _visible_start(text: str) -> str:
    """The first character that is neither whitespace nor hidden (a format or control character, or
    any character app/copilot/hidden.py shows as ⟨U+XXXX⟩ on a card)."""
    return next((c for c in text if not (c.isspace() or unicodedata.category(c) in ("Cf", "Cc") or HIDDEN_STRICT.match(c))), "")


from app.admin import channels, tokens  # noqa: E402,F401  (the tokens and channels pages: their routes join this blueprint)
