"""How a pass of a run ends — done, paused on its cards, stopped or failed — written with its
messages in one short transaction, if the pass is still this worker's; and the progress a pass
saves after each step that ran tools."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import Any, Protocol

import sqlalchemy as sa
from flask import current_app
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolReturnPart
from pydantic_ai.tools import DeferredToolRequests

from app.copilot.turns import _runs as runs
from app.copilot.turns._agent import Turn, cards_asked
from app.copilot.turns._history import NOT_RUN, Pass, answer_open_calls, dump, ran_in_pass, unanswered
from app.copilot.turns._rows import write_messages
from app.extensions import core, db, won
from app.models import Conversation, Message, Run
from app.status import Role, RunNext, RunStatus

log = logging.getLogger(__name__)


class Shown(Protocol):
    """The streamed words of a pass (turns._Words): what was shown, and a flush of the rest."""

    shown: str

    @property
    def response_shown(self) -> str: ...

    def flush(self) -> None: ...


def save_progress(work: Pass, messages: list[ModelMessage]) -> None:
    """Tools ran: keep the history they reached, so a failure, a stop or a dead worker never
    makes the model forget (or redo) what ran. One short transaction."""
    if not still_running(work.run.id):
        db.session.commit()  # (ends the read: nothing is held while the model thinks)
        return
    core(_SET_HISTORY, {"conversation_id": work.run.conversation_id, "new_history": dump(messages)})
    core(_CONTINUES, {"run_id": work.run.id})
    db.session.commit()
    work.progressed = True


def still_running(run_id: int) -> bool:
    return bool(core(_STATUS, {"run_id": run_id}).scalar() == RunStatus.RUNNING)


# Built once (see turns._runs): the statements every pass's end runs, as Core (extensions.core).
_STATUS = sa.select(Run.status).where(Run.id == sa.bindparam("run_id"))
_SET_HISTORY = (
    sa.update(Conversation).where(Conversation.id == sa.bindparam("conversation_id")).values(history=sa.bindparam("new_history"))
)
_CONTINUES = sa.update(Run).where(Run.id == sa.bindparam("run_id")).values(next=RunNext.CONTINUE)


@functools.cache
def _end_statement(columns: tuple[str, ...]) -> sa.Update:
    """The conditional UPDATE that ends a pass (if it is still running), setting its status and
    these columns from the parameters `new_<column>`: one statement per way of ending."""
    values: dict[str, sa.BindParameter[Any]] = {name: sa.bindparam(f"new_{name}") for name in ("status", *columns)}
    return sa.update(Run).where(Run.id == sa.bindparam("run_id"), Run.status == RunStatus.RUNNING).values(**values)


def end(work: Pass, status: str, added: list[Message], conversation_history: str | None = None, **values: Any) -> bool:
    """Write the pass's end (the run's `values`), the conversation's history when given, and the
    pass's messages in one transaction, if the pass is still this worker's (the run's conditional
    UPDATE decides, first); then publish the turn's end. True when the end was published."""
    run = work.run
    ending = {"run_id": run.id, "new_status": status, **{f"new_{name}": value for name, value in values.items()}}
    if not won(_end_statement(tuple(sorted(values))), ending):
        db.session.rollback()
        log.warning("run %s ended elsewhere (interrupted?); its pass's end is dropped", run.id)
        return False
    if conversation_history is not None:
        core(_SET_HISTORY, {"conversation_id": run.conversation_id, "new_history": conversation_history})
    write_messages(added, run.id, work.step)
    db.session.commit()
    published = runs.publish_end(run, work.step, status, added)
    for listener in list(current_app.extensions.get("turns.listeners", ())):  # (turns.listen)
        try:
            listener(run.conversation_id, added)
        except Exception:
            log.exception("a turn listener failed for run %s", run.id)
    cards = [m.approval_id for m in added if m.approval_id]
    if cards:
        cards_asked(cards)
    return published


def usage_after(run: Run, usage: Any, started: float) -> dict[str, Any]:
    return {
        "requests": (run.requests or 0) + usage.requests,
        "input_tokens": (run.input_tokens or 0) + (usage.input_tokens or 0),
        "output_tokens": (run.output_tokens or 0) + (usage.output_tokens or 0),
        "duration_ms": (run.duration_ms or 0) + int((time.perf_counter() - started) * 1000),
    }


def end_finished(work: Pass, turn: Turn, result: Any, started: float) -> bool:
    """Done, or paused on the cards it asked for: the conversation's history moves on."""
    run = work.run
    history = dump(result.all_messages())
    conversation_id = run.conversation_id
    said = "\n\n".join(work.texts) or (str(result.output) if not isinstance(result.output, DeferredToolRequests) else "")
    added = [Message(conversation_id=conversation_id, role=Role.ASSISTANT, text=said)] if said else []
    if isinstance(result.output, DeferredToolRequests):
        status = RunStatus.PAUSED
        added += [Message(conversation_id=conversation_id, role=Role.CARD, approval_id=a.id) for a in turn.created]
    else:
        status = RunStatus.DONE
    values = {"history": history, "step": work.step, "next": RunNext.RESULTS, **usage_after(run, result.usage, started)}
    return end(work, status, added, conversation_history=history, **values)


def end_stopped(work: Pass, messages: list[ModelMessage], text: Shown, started: float) -> bool:
    """Stopped at a step: the history keeps what ran (calls it had not run are answered as not
    run), the words shown so far are kept, and a notice says what ran. (Its published end forgets
    the stop request.)"""
    text.flush()
    history = list(messages)
    if len(history) < len(work.history):  # stopped before its first request went: what it read stands
        history = list(work.history)
    if len(history) > len(work.history) and isinstance(history[-1], ModelResponse):
        history[-1:] = _as_shown(history[-1], text.response_shown)
    calls = unanswered(history)
    if calls:
        answer_open_calls(
            history, [ToolReturnPart(tool_name=c.tool_name, content=NOT_RUN, tool_call_id=c.tool_call_id) for c in calls]
        )
    ran = ran_in_pass(work, history)
    conversation_id = work.run.conversation_id
    added = []
    if text.shown.strip():
        added.append(Message(conversation_id=conversation_id, role=Role.ASSISTANT, text=text.shown.strip()))
    added.append(
        Message(
            conversation_id=conversation_id,
            role=Role.NOTICE,
            text=f"Stopped. Before it stopped: {'; '.join(ran)}." if ran else runs.NOTHING_RAN,
        )
    )
    moved = len(history) > len(work.history) or work.progressed or work.news
    return end(
        work,
        RunStatus.STOPPED,
        added,
        conversation_history=dump(history) if moved else None,
        step=work.step,
        next=RunNext.CONTINUE,
        duration_ms=(work.run.duration_ms or 0) + int((time.perf_counter() - started) * 1000),
    )


def end_failed(work: Pass, exc: Exception, started: float) -> bool:
    """The model failed: what ran stays (its history is saved), the person's message is kept,
    and a notice with Retry says so plainly. Retry runs this same pass again."""
    log.warning("pass of run %s failed: %s: %s", work.run.id, type(exc).__name__, exc)
    db.session.rollback()
    notice = Message(conversation_id=work.run.conversation_id, role=Role.ERROR, text=failure_message(exc))
    return end(
        work,
        RunStatus.FAILED,
        [notice],
        error=f"{type(exc).__name__}: {exc}"[:1000],
        duration_ms=(work.run.duration_ms or 0) + int((time.perf_counter() - started) * 1000),
    )


def _as_shown(response: ModelResponse, shown: str) -> list[ModelMessage]:
    """The response the stop cut, as the person saw it: its words up to the stop, its calls kept
    (answered as not run); none at all when nothing of it remains. The model remembers saying
    what was shown, no more."""
    parts = [*([TextPart(shown)] if shown else []), *(p for p in response.parts if not isinstance(p, TextPart))]
    return [dataclasses.replace(response, parts=parts)] if parts else []


def failure_message(exc: Exception) -> str:
    """What the person reads when the model fails; the details go to the log and the run."""
    if isinstance(exc, UsageLimitExceeded):
        said = "The assistant took too many steps without finishing, so it was stopped."
    elif isinstance(exc, ModelHTTPError):
        if exc.status_code == 429:
            said = "The model is busy right now (rate limited)."
        elif exc.status_code >= 500:
            said = f"The model's service failed (HTTP {exc.status_code})."
        else:
            said = f"The model's service refused the request (HTTP {exc.status_code})."
    elif isinstance(exc, ModelAPIError):
        cause = f"{exc} {exc.__cause__!r}".lower()
        said = (
            "The model did not answer in time."
            if "timeout" in cause or "timed out" in cause
            else "The model's service could not be reached."
        )
    elif isinstance(exc, UnexpectedModelBehavior):
        said = "The model sent an answer that could not be used."
    else:
        said = "The assistant could not finish this turn."
    return f"{said} Your message is saved; press Retry to try again."
