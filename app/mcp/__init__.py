"""Countersign over MCP (streamable HTTP, protocol 2026-07-28): the actions in the token's
toolsets as tools; a missing field is a form elicitation, a card is a URL elicitation to the
card's page, both as an InputRequiredResult whose sealed request state names the approval.
An agent-scoped token (the default) never answers: its forms are URL elicitations too, filled
by the person on the card's page, and its declines decide nothing. Every answer goes through
copilot.approvals, like the browser's."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from flask import Flask
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.types import ASGIApp

from app.errors import ServiceUnavailable
from app.extensions import DATABASE_AWAY
from app.mcp.bearer import BearerAuth, current_token, principal
from app.mcp.hints import ANNOTATIONS
from app.status import ApprovalType, Decision

log = logging.getLogger(__name__)
AUDIENCE = "countersign"


def create_mcp_app(flask_app: Flask) -> ASGIApp:
    """The ASGI app serving /mcp, bound to a Flask app for the database and the engine."""
    config = flask_app.config
    keys = [k for k in config["MCP_STATE_KEYS"] if k]
    security = RequestStateSecurity(
        keys=keys, audience=AUDIENCE, ttl=float(config["APPROVALS_TTL"]), bind_principal=lambda ctx: principal()
    )
    server: Server[Any] = Server(
        AUDIENCE,
        version="1",
        instructions=_INSTRUCTIONS,
        on_list_tools=_list_tools(flask_app),
        on_call_tool=_call_tool(flask_app),
    )
    server.middleware.append(RequestStateBoundary(security, default_audience=AUDIENCE))
    starlette: Starlette = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=False,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(config["MCP_ALLOWED_HOSTS"]),
            allowed_origins=list(config["MCP_ALLOWED_ORIGINS"]),
        ),
    )
    return BearerAuth(starlette, flask_app)


_INSTRUCTIONS = (
    "Countersign runs actions on the person's behalf. Destructive and external tools wait for "
    "the person to confirm a card in their browser; you cannot confirm it for them."
)


async def _in_app(flask_app: Flask, fn: Any, *args: Any, unavailable: Callable[[], Any] | None = None) -> Any:
    """Run engine code in a worker thread, in a Flask app context (its own DB session). What it
    raises never reaches the client in its own words (the SDK sends a handshake-era client the
    exception's text: an OperationalError's SQL and its values): the database away, locked past
    its wait or out of connections is what `unavailable()` gives (a tool's error result, for the
    model to read), else an error in Countersign's words; anything else, logged, is an internal error."""
    from app.extensions import db

    def run() -> Any:
        with flask_app.app_context():
            try:
                return fn(*args)
            finally:
                db.session.remove()

    try:
        return await anyio.to_thread.run_sync(run)
    except MCPError:
        raise
    except DATABASE_AWAY as error:
        log.error("database error in an MCP request: %s", error)
        if unavailable is not None:
            return unavailable()
        raise MCPError(code=types.INTERNAL_ERROR, message=ServiceUnavailable.message) from None
    except Exception:
        log.exception("an MCP request raised")
        raise MCPError(code=types.INTERNAL_ERROR, message="Internal server error") from None


def _actor(token_id: int) -> Any:
    """Who calls: the token's person, bound to "pat:<id>", with its scope and toolsets."""
    from app.auth import token_actor
    from app.extensions import db
    from app.models import ApiToken

    token = db.session.get(ApiToken, token_id)
    assert token is not None
    return token_actor(token, "mcp")


def _list_tools(flask_app: Flask) -> Any:
    async def handler(ctx: Any, params: Any) -> types.ListToolsResult:
        return await _in_app(flask_app, _tools, current_token.get())

    return handler


def _tools(token_id: int) -> types.ListToolsResult:
    from app.copilot import engine
    from app.copilot.actions import tool_schema

    reach = engine().reachable(_actor(token_id).toolsets)  # the same set call_direct allows
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=a.name, description=a.description(), input_schema=tool_schema(a.Input), annotations=ANNOTATIONS[a.kind]
            )
            for a in engine().registry.exposed()
            if a.name in reach
        ]
    )


MODERN = "2026-07-28"


def _call_tool(flask_app: Flask) -> Any:
    async def handler(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        token = current_token.get()
        result = await _in_app(flask_app, _call, token, params, unavailable=_unavailable)
        if not isinstance(result, Ask):
            return result
        caps = ctx.session.client_capabilities
        if caps is None:  # a stateless handshake-era request carries none: try, and fall back below
            can_url = can_form = True
        else:
            elicitation = caps.elicitation
            can_url = elicitation is not None and elicitation.url is not None
            can_form = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
        if result.by_url and not can_url:
            return _text(result.pending())
        if not result.by_url and not can_form:
            return await _in_app(
                flask_app, _answer, token, result.approval_id, types.ElicitResult(action="decline"), unavailable=_unavailable
            )
        if ctx.protocol_version >= MODERN:
            return result.input_required()
        # Handshake-era clients: a classic elicitation/create inside this call.
        try:
            if not result.by_url:
                answer = await ctx.session.elicit_form(result.message, result.schema, related_request_id=ctx.request_id)
            else:
                answer = await ctx.session.elicit_url(
                    result.message, result.url, result.approval_id, related_request_id=ctx.request_id
                )
        except Exception as error:  # the client cannot be asked: nothing runs, it is told where to answer
            log.info("elicitation/create failed: %r", error)
            return _text(f"Pending: the person must answer this in Countersign: {result.url}")
        return await _in_app(flask_app, _answer, token, result.approval_id, answer, True, unavailable=_unavailable)

    return handler


@dataclass
class Ask:
    """The call waits on the person: a form the client fills (form elicitation, client tokens
    only), or a card or form the person answers on its page (URL elicitation)."""

    approval_id: str
    kind: str
    message: str
    schema: dict[str, Any]
    url: str
    by_url: bool = True

    def pending(self) -> str:
        verb = "confirm this" if self.kind == ApprovalType.CONFIRM else "fill this in"
        return f"Pending: the person must {verb} in Countersign: {self.url}"

    def input_required(self) -> types.InputRequiredResult:
        if not self.by_url:
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=self.message, requested_schema=self.schema)
            )
        else:
            request = types.ElicitRequest(
                params=types.ElicitRequestURLParams(message=self.message, url=self.url, elicitation_id=self.approval_id)
            )
        return types.InputRequiredResult(
            input_requests={"answer": request}, request_state=json.dumps({"approval": self.approval_id})
        )


def _text(text: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _unavailable() -> types.CallToolResult:
    """The web's 503, as a tool's error (the database away, locked past its wait, no connection)."""
    return _text(ServiceUnavailable.message, error=True)


def _call(token_id: int, params: types.CallToolRequestParams) -> Any:
    from app import copilot
    from app.copilot.approvals import card_url, prompt_for

    if params.request_state:
        return _retry(token_id, params)
    refused = _refused(token_id, params.arguments or {})
    if refused is not None:
        return refused
    actor = _actor(token_id)
    said, approval = copilot.call_direct(actor, params.name, params.arguments or {})
    if approval is None:
        return _text(said, error=said.startswith(("Unknown tool", "Invalid arguments")))
    shown = prompt_for(approval, actor)  # the action's words only, never the model's
    if shown.form is not None:
        form = shown.form
        if actor.agent:  # the person fills it on the card's page; the agent never sees the values
            return Ask(shown.id, "form", f"{form['message']} Fill it in Countersign.", {}, card_url(shown.id))
        return Ask(shown.id, "form", form["message"], form["requestedSchema"], card_url(shown.id), by_url=False)
    return Ask(shown.id, ApprovalType.CONFIRM, f"{shown.text} Confirm it in Countersign.", {}, card_url(shown.id))


def _refused(token_id: int, arguments: dict[str, Any]) -> types.CallToolResult | None:
    """A new call over the token's rate limit, or with a value no database here can store (NUL,
    a lone surrogate, NaN): a tool error the model can read, before anything runs or is stored.
    The retries of a waiting call are not counted: a client asks again until the person answers."""
    from app.copilot.text import seconds, value_problem
    from app.extensions import seconds_over_limit

    wait = seconds_over_limit("RATELIMIT_MCP_CALLS_PER_TOKEN", f"token:{token_id}")
    if wait:
        return _text(f"Too many tool calls with this token. Try again in {seconds(wait)}.", error=True)
    problem = value_problem(arguments)
    return _text(f"Invalid arguments: {problem}", error=True) if problem else None


def _retry(token_id: int, params: types.CallToolRequestParams) -> Any:
    """The client came back with the sealed state (bound to its token by the SDK's boundary)."""
    try:
        approval_id = json.loads(params.request_state or "{}")["approval"]
    except (ValueError, KeyError, TypeError):
        return _text("This request state is not valid.", error=True)
    answer = (params.input_responses or {}).get("answer")
    return _answer(token_id, approval_id, answer if isinstance(answer, types.ElicitResult) else None)


def _answer(token_id: int, approval_id: str, answer: types.ElicitResult | None, legacy: bool = False) -> Any:
    """Answer a form through copilot.approvals, or report a card's outcome (or that it waits).
    An agent token's answer is refused there (and audited): the approval keeps waiting."""
    from app import copilot
    from app.copilot.approvals import ChannelProof, card_url, prompt_for, recover, standing
    from app.copilot.text import value_problem
    from app.errors import CountersignError
    from app.extensions import db
    from app.models import Approval
    from app.status import Status

    actor = _actor(token_id)
    approval = db.session.get(Approval, approval_id)
    if approval is None or approval.user_id != actor.user.id:
        return _text("This request state is not valid.", error=True)
    approval = standing(approval)  # edited on its page, or asked afresh: the fresh card answers the call
    problem = value_problem(answer.content) if answer is not None and answer.content else None
    if problem:  # a client's form values are stored by handle(): refused before, the form still waits
        return _text(f"Invalid values: {problem} Nothing was done.", error=True)
    proof = ChannelProof("the MCP session's own bearer token")
    if actor.agent and approval.status == Status.PENDING and answer is not None:
        if answer.action != "accept" or answer.content:  # an answer, not "I opened the link"
            try:
                copilot.answer(approval.id, proof, actor, Decision.DECLINE)  # refused first thing, audited
            except CountersignError:
                db.session.rollback()
            return _text(
                f"Pending: only the person can answer this, in Countersign: {card_url(approval.id)} Nothing was decided."
            )
        answer = None
    decision = _decision(approval.type, answer)
    if approval.status == Status.PENDING and decision is not None:
        try:
            values = dict(answer.content or {}) if answer is not None and decision == Decision.SUBMIT else None
            approval = copilot.answer(approval.id, proof, actor, decision, values)
        except CountersignError as error:
            return _text(recover(approval.id, actor, error).error or error.message, error=True)
    db.session.refresh(approval)
    shown = prompt_for(approval, actor)
    if shown.told is None:  # still waiting: confirmed, it may wait for a second signature
        if legacy:  # a handshake-era client cannot come back with the state
            return _text(f"Pending: the person confirms it in Countersign: {card_url(shown.id)}")
        # The person answers on the card's page; the client asks again until they have.
        return types.InputRequiredResult(request_state=json.dumps({"approval": shown.id}))
    return _text(shown.told, error=shown.status not in (Status.DONE, Status.QUEUED))  # queued: it ran, and goes out


def _decision(kind: str, answer: types.ElicitResult | None) -> str | None:
    """What an elicitation's answer means for a card or form (None: nothing to decide)."""
    if answer is None:
        return None
    if kind == ApprovalType.FORM and answer.action == "accept":
        return Decision.SUBMIT
    if answer.action == "decline":
        return Decision.DECLINE
    return Decision.CANCEL if kind == ApprovalType.FORM and answer.action == "cancel" else None
