"""The paths of conversations: start, list, read, rename, delete, talk, retry, stop, and the events."""

from __future__ import annotations

from typing import Any

from app.api.openapi.pieces import (
    ERROR,
    ID,
    PREFER,
    QUEUED,
    errors_of,
    json_body,
    json_content,
    object_of,
    ok,
    operation,
    query,
    ref,
)


def conversation_paths() -> dict[str, Any]:
    """Starting a conversation, reading it, talking in it and following its events."""
    stopping = object_of({"run": {"type": ["integer", "null"]}, "stopping": {"type": "boolean"}})
    return {
        "/api/conversations": {
            "get": _list_conversations(),
            "post": operation(
                "Start a conversation",
                "createConversation",
                {"201": ok("Created", object_of({"id": {"type": "integer"}})), **errors_of(401)},
            ),
        },
        "/api/conversations/{id}": {
            "get": operation(
                "All messages and pending prompts",
                "getConversation",
                {"200": ok("The conversation", ref("Turn")), **errors_of(401, 404)},
                parameters=[ID],
            ),
            **_manage_conversation(),
        },
        "/api/conversations/{id}/messages": {"post": _message()},
        "/api/conversations/{id}/retry": {
            "post": operation(
                "Run the last turn again after it failed or was interrupted (a second press runs nothing; "
                "an agent-scoped token only a turn it started: 403)",
                "retryTurn",
                {"200": ok("What the agent added", ref("Turn")), "202": QUEUED, **errors_of(401, 403, 404, 429)},
                parameters=[ID, PREFER],
            )
        },
        "/api/conversations/{id}/stop": {
            "post": operation(
                "End the running turn at its next step (its `stopped` end follows on the events; an "
                "agent-scoped token only a turn it started: 403)",
                "stopTurn",
                {"200": ok("Which run will stop (null: none was running)", stopping), **errors_of(401, 403, 404)},
                parameters=[ID],
            )
        },
        "/api/conversations/{id}/events": {"get": _events()},
    }


SUMMARY = object_of(
    {"id": {"type": "integer"}, "title": {"type": "string"}, "created_at": {"type": "string", "format": "date-time"}}
)


def _list_conversations() -> dict[str, Any]:
    """GET /api/conversations: the person's own, searched with `q`."""
    summaries = {"type": "array", "items": SUMMARY}
    return operation(
        "The person's conversations, newest first (100 at most)",
        "listConversations",
        {"200": ok("Their conversations", object_of({"conversations": summaries})), **errors_of(401)},
        description="`q` keeps those whose title or messages hold it, case-insensitively and literally "
        "(`%` and `_` are no wildcards). Another person's and deleted conversations are never listed.",
        parameters=query("q"),
    )


def _manage_conversation() -> dict[str, Any]:
    """PATCH and DELETE /api/conversations/{id}: the person renames or deletes their own."""
    deleted = object_of(
        {"id": {"type": "integer"}, "deleted": {"type": "boolean"}, "cancelled": {"type": "array", "items": {"type": "string"}}}
    )
    return {
        "patch": operation(
            "Rename the conversation",
            "renameConversation",
            {"200": ok("Renamed", SUMMARY), **errors_of(400, 401, 403, 404)},
            description="403 for an agent-scoped token: only the person names their conversations.",
            parameters=[ID],
            body=json_body(object_of({"title": {"type": "string", "minLength": 1, "maxLength": 200}}, ["title"])),
        ),
        "delete": operation(
            "Delete the conversation",
            "deleteConversation",
            {
                "200": ok("Deleted; the cards it ended", deleted),
                **errors_of(401, 403, 404),
                "409": {"description": "A turn is still running: stop it, then delete", **json_content(ERROR)},
            },
            description="From then on the conversation is 404 on every route. Its cards still waiting end "
            "`cancelled` (audited; nothing runs) and its paused turn is stopped. 403 for an agent-scoped "
            "token: ending a card is answering it, which only the person does.",
            parameters=[ID],
        ),
    }


EVENTS_DESCRIPTION = (
    "Each event has an `id` (`<milliseconds>-<sequence>`, as Redis Streams number them); reconnect "
    "with `Last-Event-ID` (or `?after=`) to resume with no gap and no repeat (`0-0`: from the "
    "oldest event kept; a cursor that is not such an id is ignored, and the stream starts from "
    "now). `event: text` — `{run, step, text}`, the model's words as "
    "they are written; `event: turn` — `{run, step, state, answers}` (`answers`: the id of the "
    "person's message the run's first pass answers, else null) with state `started`, then "
    "one of `done`, `paused`, `failed`, `stopped`, `interrupted` with the pass's "
    "`messages` and the `pending` prompts; `event: approval` — `{id, status}`, a card's "
    "new status, whoever decided it, on any channel; `event: title` — `{title}`, the conversation's "
    "new title (its first message, or a rename). Without a cursor, a turn still running is "
    "replayed from its start. The stream ends after EVENTS_STREAM_SECONDS; reconnect."
)


STREAMED_DESCRIPTION = (
    "Asked with `Accept: text/event-stream`, the answer is the turn itself: 200 with the "
    "conversation's events from this message on (as `GET …/events` sends them, with the same ids), "
    "ending after the end of the pass this message started (`done`, `paused` on its cards, "
    "`failed`, `stopped`); errors before it are JSON as always. Reconnect to `…/events` with "
    "`Last-Event-ID` to resume. Served by the ASGI process (`uvicorn asgi:app`), the pass runs there "
    "and the answer carries the events that process appends (what others do meanwhile: `…/events`)."
)


def _message() -> dict[str, Any]:
    """POST /api/conversations/{id}/messages: waited for as Prefer says, or answered with its turn."""
    return operation(
        "Say something to the agent",
        "postMessage",
        {"200": _said(), "202": QUEUED, **errors_of(400, 401, 404, 413, 429)},
        description=STREAMED_DESCRIPTION,
        parameters=[ID, PREFER],
        body=json_body(object_of({"text": {"type": "string"}}, ["text"])),
    )


def _said() -> dict[str, Any]:
    """A message's 200: what the agent added (JSON), or, asked for, the turn's events."""
    stream = {"text/event-stream": {"schema": {"type": "string"}}}
    answered = ok("What the agent added (JSON), or the turn's events (text/event-stream)", ref("Turn"))
    return {**answered, "content": {**answered["content"], **stream}}


def _events() -> dict[str, Any]:
    """GET /api/conversations/{id}/events: a Server-Sent Events stream, resumable from a cursor."""
    cursor = [
        {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
        {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
    ]
    stream = {"description": "text/event-stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    return operation(
        "The conversation's live events (Server-Sent Events)",
        "conversationEvents",
        {"200": stream, **errors_of(401, 404)},
        description=EVENTS_DESCRIPTION,
        parameters=[ID, *cursor],
    )
