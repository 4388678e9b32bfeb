"""What a pass of a run reads: the conversation's history, the person's message or the answers to
its cards, and what the model is told of calls still open (read in one short transaction)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import sqlalchemy as sa
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import DeferredToolResults
from sqlalchemy.orm import joinedload, undefer

from app.copilot.approvals import told
from app.copilot.text import AGENT_WORDS
from app.copilot.turns import _runs as runs
from app.copilot.turns._line import Adopted, news_before
from app.copilot.turns._offline import NEWS
from app.extensions import db
from app.models import ApiToken, Approval, Conversation, Message, Run, User
from app.status import FINAL, RunNext, Status

WAITING = "Waiting for the person's answer on a card. It has not run."
NOT_RUN = "Not run: the person stopped the turn before this call ran."
UPDATE = "Update from Countersign on calls you made earlier (not the person's words): "


@dataclass
class Pass:
    """What one pass of a run reads, loaded in a short transaction before the model is called."""

    run: Run
    user: User
    history: list[ModelMessage]
    prompt: str | None = None
    results: DeferredToolResults | None = None
    step: int = 0
    texts: list[str] = field(default_factory=list)  # what the model said in this pass, in order
    progressed: bool = False  # tools ran, and the history they reached is saved
    news: bool = False  # the history ends with news the pass added (tell_news): kept even if stopped


def load(history: str) -> list[ModelMessage]:
    return list(ModelMessagesTypeAdapter.validate_json(history or "[]"))


def dump(messages: list[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(messages).decode()


def unanswered(history: list[ModelMessage]) -> list[ToolCallPart]:
    """The tool calls of the last response that nothing has answered yet (cards still waiting;
    calls of the same step that ran are answered in the request after it)."""
    last = next((i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], ModelResponse)), None)
    if last is None:
        return []
    answered = {
        p.tool_call_id
        for m in history[last + 1 :]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    }
    return [p for p in history[last].parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered]


def answer_open_calls(history: list[ModelMessage], parts: list[ToolReturnPart]) -> None:
    """Add returns for open calls to the request after them (made when there is none)."""
    if history and isinstance(history[-1], ModelRequest):
        history[-1] = dataclasses.replace(history[-1], parts=[*history[-1].parts, *parts])
    else:
        history.append(ModelRequest(parts=parts))


_WITH_PERSON = (joinedload(Conversation.user).joinedload(User.tenant), undefer(Conversation.history))


def prepare(run: Run, known: Adopted | None = None) -> Pass:
    """Read what the pass needs, in one short transaction, and end it (the person and their tenant
    come with the conversation: the actions' context reads both later). `known`: the person, the
    conversation's history and whether news waits, when the caller read them in this transaction
    (turns._line.adopt)."""
    if known is None:
        conversation = db.session.get(Conversation, run.conversation_id, options=_WITH_PERSON)
        assert conversation is not None
        user, history = conversation.user, load(conversation.history)
    else:
        user, history = known.person, load(known.history)
    work = Pass(run=run, user=user, history=history, step=run.step + 1)
    calls = unanswered(history)
    said: Message | None = None
    if run.next == RunNext.RESULTS:
        # An edited card's fresh one, in the same run and step, answers the model's call in its place.
        step = [a for a in runs.step_approvals(run) if a.status != Status.EDITED]
        lines = {a.tool_call_id: told(a) for a in step}
        ours = {(a.tool_call_id, a.action) for a in step}  # (a model may reuse ids: "call_0" for every call)
        if calls and {(c.tool_call_id, c.tool_name) for c in calls} <= ours:
            work.results = DeferredToolResults(calls={c.tool_call_id: lines[c.tool_call_id] for c in calls})
        else:  # the conversation moved on while the cards waited: tell the model as news
            note = " ".join(f"{a.action} ({a.tool_call_id}): {lines[a.tool_call_id]}" for a in step)
            tell_news(work.history, answers_for(run.conversation_id, calls) if calls else [], note, [*lines.values()])
            work.news = True
    elif run.next == RunNext.PROMPT:
        said = db.session.get(Message, run.message_id) if run.message_id else None
        work.prompt = written_by(run) + (said.text if said is not None else "")
    if work.prompt is not None and calls:
        answer_open_calls(work.history, answers_for(run.conversation_id, calls))
    news = delivered(said) if known is None or known.news else []
    if news:  # (its own part before the person's words: their message stays theirs, and last)
        tell_news(work.history, [], " ".join(news), news)
    db.session.commit()
    return work


def written_by(run: Run) -> str:
    """Before an agent credential's words, for the model: who wrote them ("[Written by an agent
    (token 'laptop'), not by the person:] "), so that it never takes them for the person's own.
    Kept in the conversation's history with the words, so every later pass reads it too."""
    if not run.agent:
        return ""
    _, _, rest = (run.via or "").partition(":")
    token = db.session.get(ApiToken, int(rest[4:])) if rest.startswith("pat:") and rest[4:].isdigit() else None
    named = f" (token '{token.name}')" if token is not None and token.name else ""
    return AGENT_WORDS.format(named=named)


def tell_news(history: list[ModelMessage], returns: list[ToolReturnPart], note: str, relayed: list[str]) -> None:
    """What a continuation tells the model when the conversation moved on while its cards waited
    (a later message came; its run may have made calls that still wait). The history is one
    transcript in the order things happened, and no run rewrites another's: the call was answered
    "waiting" in it when the person wrote again, and the later message and what the model did
    with it stay where they were. After all of that comes one request: the calls still open
    answered with their state (waiting, not run, or decided), then a note naming each of this
    step's calls (action and call id) with its outcome, as Countersign's, never the person's: the
    request is marked (`NEWS` in its metadata, which no provider is sent: a model reads the
    note's words; the offline model relays the outcomes), and the pass resumes from it with no
    prompt of its own, so the model answers with the outcome, not as if the person had written.
    (Deliveries that ended before a person's message are news the same way, just before it.)"""
    told = UserPromptPart(UPDATE + note)
    if history and isinstance(history[-1], ModelRequest):  # (calls answered just before, or by a stop: join it)
        last = history[-1]
        mark = {**(last.metadata or {}), NEWS: [*(last.metadata or {}).get(NEWS, []), *relayed]}
        history[-1] = dataclasses.replace(last, parts=[*last.parts, *returns, told], metadata=mark)
    else:
        history.append(ModelRequest(parts=[*returns, told], metadata={NEWS: relayed}))


def delivered(said: Message | None) -> list[str]:
    """News for the model before the person's message: the deliveries that ended since their
    previous one (delivery.settle's notices, which belong to no run), oldest first."""
    if said is None:
        return []
    return list(db.session.scalars(_NEWS, {"conversation_id": said.conversation_id, "said": said.id}))


_NEWS = (
    sa.select(Message.text)
    .where(news_before(sa.bindparam("conversation_id"), sa.bindparam("said", type_=sa.Integer)))
    .order_by(Message.id)
)


def answers_for(conversation_id: int, calls: list[ToolCallPart]) -> list[ToolReturnPart]:
    """What the model reads for calls still open when the person writes again: a card's state
    (a model may reuse call ids: the conversation's newest approval with the id and action is the one)."""
    ids = [c.tool_call_id for c in calls]
    known = {
        (a.tool_call_id, a.action): a
        for a in db.session.scalars(
            sa.select(Approval)
            .where(
                Approval.conversation_id == conversation_id,
                Approval.tool_call_id.in_(ids),
                Approval.status != Status.EDITED,  # its fresh card stands for it
            )
            .order_by(Approval.created_at)
        )
    }
    parts = []
    for call in calls:
        approval = known.get((call.tool_call_id, call.tool_name))
        if approval is None:
            line = NOT_RUN
        elif approval.status in FINAL:
            line = told(approval)
        else:
            line = WAITING
        parts.append(ToolReturnPart(tool_name=call.tool_name, content=line, tool_call_id=call.tool_call_id))
    return parts


def ran_in_pass(work: Pass, history: list[ModelMessage]) -> list[str]:
    """What the actions said in this pass (their own result lines), oldest first."""
    lines = []
    for message in history[len(work.history) :]:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.content not in (NOT_RUN, WAITING):
                    lines.append(f"{part.tool_name}: {part.content}")
    return lines
