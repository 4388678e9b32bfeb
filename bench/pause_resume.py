"""P6: one approval in process — the person's message → the card → confirm → the run resumed to
its final words — with an instant model, on SQLite, through three stacks and two floors, alternating in one run:

- Countersign: `copilot.send_message()` (TURNS_RUNNER=inline: the pass runs in the call) pauses on a
  `delete_post` card; the card's token is signed as the page would sign it; `copilot.answer(…,
  "confirm")` decides it (handle() deletes the post) and runs the continuation to its words.
- LangGraph: a `StateGraph` (model → approve → model) whose approve node calls `interrupt()`, a
  `SqliteSaver` checkpointer; the confirm builds and compiles the graph anew (a fresh graph object,
  as a request in another worker would) and resumes it with `Command(resume=…)`; the approve node
  deletes a row of a posts table in the same SQLite file.
- pydantic-ai alone: a tool raising `CallDeferred`; the run's history saved as JSON (a row in a
  SQLite file), loaded back on confirm, the row deleted, and the run resumed with
  `DeferredToolResults`; the final history saved again.
- the floor: the same two pydantic-ai runs with nothing stored (the history kept in memory, the
  posts a dict): what a stack running its turns with pydantic-ai's agent pays before it stores
  anything.
- the floor with its writes: the same two runs, and the five durable writes the guarantees (docs/guarantees.md) ask of an
  approval (the message, the card, the claim, handle()'s work with its audit row, the reply), each
  one plain INSERT and its commit: what no design that keeps those promises on pydantic-ai's agent
  goes under.

The same instant model decides in each: a `delete_post` call for the message, then "Deleted it."
once the call's result is back (pydantic-ai's `FunctionModel` for Countersign and pydantic-ai; a
plain function in LangGraph's model node, its messages plain dicts: no LangChain message objects).

    python bench/pause_resume.py [--n 300] [--warm 20] [--json]

After `--warm` approvals of each (not counted), n approvals of each, the five in a rotating order. Medians
and p95s, and the ratios: ours ÷ LangGraph, ours ÷ pydantic-ai (medians, and p95s), pydantic-ai ÷ LangGraph,
the floor ÷ LangGraph.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import re
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _harness import env_for, percentiles, prepare, temp_sqlite

FINAL = "Deleted it."
POST = re.compile(r"post (\d+)")


def decide(prompt: str, result: str | None) -> dict[str, Any]:
    """The instant model's choice: a delete_post call for the person's message; words once its result is back."""
    if result is not None:
        return {"text": FINAL}
    match = POST.search(prompt)
    assert match, prompt
    return {"call": "delete_post", "arguments": {"post": int(match.group(1))}}


def function_model() -> Any:
    """The instant model as a pydantic-ai FunctionModel (Countersign's and pydantic-ai's side)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel

    def respond(messages: list[Any], info: Any) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        prompts = [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)]
        choice = decide(str(prompts[-1]), str(returned[0].content) if returned else None)
        if "text" in choice:
            return ModelResponse(parts=[TextPart(choice["text"])])
        return ModelResponse(
            parts=[ToolCallPart(choice["call"], choice["arguments"], tool_call_id=f"call_{uuid.uuid4().hex[:12]}")]
        )

    return FunctionModel(respond, model_name="instant")


# --- LangGraph ---


# (spelled as a call: LangGraph reads the annotations at run time, and this module's are strings)
GraphState = TypedDict("GraphState", {"messages": Annotated[list[dict[str, Any]], operator.add]})  # noqa: UP013


def langgraph_side(folder: Path) -> tuple[Callable[[Any], Any], Callable[[Any], str], Callable[[], Any]]:
    """LangGraph's message (→ the card) and confirm (→ the final words), and a new post's id."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    # The checkpointer's connection, and the posts' own (the saver writes from LangGraph's threads
    # in transactions of its own); one WAL file.
    saved = sqlite3.connect(folder / "langgraph.sqlite3", check_same_thread=False)
    conn = sqlite3.connect(folder / "langgraph.sqlite3", check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("create table if not exists posts (id integer primary key, title text)")
    conn.commit()

    def model(state: GraphState) -> dict[str, Any]:
        messages = state["messages"]
        prompt = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        result = messages[-1]["content"] if messages[-1]["role"] == "tool" else None
        choice = decide(prompt, result)
        if "text" in choice:
            return {"messages": [{"role": "assistant", "content": choice["text"]}]}
        call = {"id": f"call_{uuid.uuid4().hex[:12]}", "name": choice["call"], "arguments": choice["arguments"]}
        return {"messages": [{"role": "assistant", "content": "", "tool_calls": [call]}]}

    def approve(state: GraphState) -> dict[str, Any]:
        call = state["messages"][-1]["tool_calls"][0]
        row = conn.execute("select title from posts where id = ?", (call["arguments"]["post"],)).fetchone()
        answer = interrupt({"reason": "Delete this post? This cannot be undone.", "rows": {"Post": row[0]}, "call": call["id"]})
        if answer["decision"] != "confirm":
            return {"messages": [{"role": "tool", "tool_call_id": call["id"], "content": "Declined."}]}
        conn.execute("delete from posts where id = ?", (call["arguments"]["post"],))
        conn.commit()
        return {"messages": [{"role": "tool", "tool_call_id": call["id"], "content": f"Deleted “{row[0]}”."}]}

    def route(state: GraphState) -> str:
        return "approve" if state["messages"][-1].get("tool_calls") else END

    def graph() -> Any:
        """A fresh graph object, compiled with a fresh checkpointer (on the same connection)."""
        builder = StateGraph(GraphState)
        builder.add_node("model", model)
        builder.add_node("approve", approve)
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", route, ["approve", END])
        builder.add_edge("approve", "model")
        return builder.compile(checkpointer=SqliteSaver(saved))

    graph()  # the checkpointer's tables (SqliteSaver.setup() runs on first use)

    def new_post() -> int:
        post = conn.execute("insert into posts (title) values ('Bench post')").lastrowid
        conn.commit()
        assert post is not None
        return post

    def message(post: int) -> Any:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        out = graph().invoke({"messages": [{"role": "user", "content": f"Please delete post {post}."}]}, config)
        card = out["__interrupt__"][0].value
        assert card["rows"]["Post"] == "Bench post", card
        return config

    def confirm(config: Any) -> str:
        out = graph().invoke(Command(resume={"decision": "confirm"}), config)
        return str(out["messages"][-1]["content"])

    return message, confirm, new_post


# --- pydantic-ai alone ---


def deferring_agent() -> Any:
    """pydantic-ai's agent of the approval: the instant model, and a `delete_post` tool that raises
    `CallDeferred` (the call waits for the person's answer)."""
    from pydantic_ai import Agent, CallDeferred, DeferredToolRequests

    agent: Agent[None, str | DeferredToolRequests] = Agent(function_model(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def delete_post(post: int) -> str:
        """Delete a post."""
        raise CallDeferred

    return agent


def pydantic_ai_side(folder: Path) -> tuple[Callable[[Any], Any], Callable[[Any], str], Callable[[], Any]]:
    """pydantic-ai's message (→ the deferred call, history saved) and confirm (history loaded, resumed)."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    conn = sqlite3.connect(folder / "pydantic_ai.sqlite3", check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("create table if not exists posts (id integer primary key, title text)")
    conn.execute("create table if not exists runs (id text primary key, history text)")
    conn.commit()
    agent = deferring_agent()

    def new_post() -> int:
        post = conn.execute("insert into posts (title) values ('Bench post')").lastrowid
        conn.commit()
        assert post is not None
        return post

    def message(post: int) -> Any:
        result = agent.run_sync(f"Please delete post {post}.")
        requests = result.output
        assert isinstance(requests, DeferredToolRequests) and requests.calls, requests
        call = requests.calls[0]
        row = conn.execute("select title from posts where id = ?", (call.args_as_dict()["post"],)).fetchone()
        assert row[0] == "Bench post", row  # the card's rows
        run = uuid.uuid4().hex
        conn.execute("insert into runs (id, history) values (?, ?)", (run, result.all_messages_json().decode()))
        conn.commit()
        return run, call.tool_call_id

    def confirm(waiting: Any) -> str:
        run, call_id = waiting
        (saved,) = conn.execute("select history from runs where id = ?", (run,)).fetchone()
        history = ModelMessagesTypeAdapter.validate_json(saved)
        call = next(p for m in history for p in getattr(m, "parts", []) if getattr(p, "tool_call_id", None) == call_id)
        post = call.args_as_dict()["post"]
        (title,) = conn.execute("select title from posts where id = ?", (post,)).fetchone()
        conn.execute("delete from posts where id = ?", (post,))
        conn.commit()
        result = agent.run_sync(
            message_history=history, deferred_tool_results=DeferredToolResults(calls={call_id: f"Deleted “{title}”."})
        )
        conn.execute("update runs set history = ? where id = ?", (result.all_messages_json().decode(), run))
        conn.commit()
        return str(result.output)

    return message, confirm, new_post


# --- pydantic-ai's two runs alone: the floor under any stack built on it ---


def floor_side() -> tuple[Callable[[Any], Any], Callable[[Any], str], Callable[[], Any]]:
    """The same two pydantic-ai runs (the deferred call, then the resume) with nothing stored: the
    history stays a Python object in memory, the posts are a dict: what a stack that runs its turns
    with pydantic-ai's agent runs (as Countersign does; issue 25 keeps it) pays before it stores
    anything."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults

    agent = deferring_agent()
    posts: dict[int, str] = {}

    def new_post() -> int:
        posts[len(posts) + 1] = "Bench post"
        return len(posts)

    def message(post: int) -> Any:
        result = agent.run_sync(f"Please delete post {post}.")
        requests = result.output
        assert isinstance(requests, DeferredToolRequests) and requests.calls, requests
        call = requests.calls[0]
        assert posts[call.args_as_dict()["post"]] == "Bench post"
        return result.all_messages(), call

    def confirm(waiting: Any) -> str:
        history, call = waiting
        title = posts.pop(call.args_as_dict()["post"])
        result = agent.run_sync(
            message_history=history, deferred_tool_results=DeferredToolResults(calls={call.tool_call_id: f"Deleted “{title}”."})
        )
        return str(result.output)

    return message, confirm, new_post


def durable_floor_side(folder: Path) -> tuple[Callable[[Any], Any], Callable[[Any], str], Callable[[], Any]]:
    """The floor's two runs and the five durable writes that the guarantees (docs/guarantees.md) ask of any approval, each one
    plain INSERT and its commit in a table of its own (SQLite, WAL and `synchronous = FULL`, as the
    app's connections), with no ORM, no Redis, no card, no token: the person's message before its
    answer, the card before it is shown, the card's claim before handle() runs (at most
    once), handle()'s work with its audit row, and the continuation's reply. What no
    design keeping those promises on pydantic-ai's agent can go under."""
    message_runs, confirm_runs, new_post = floor_side()
    conn = sqlite3.connect(folder / "durable_floor.sqlite3", check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("create table if not exists writes (what text)")

    def write(what: str) -> None:
        conn.execute("begin")
        conn.execute("insert into writes (what) values (?)", (what,))
        conn.execute("commit")

    def message(post: int) -> Any:
        write("the person's message")
        waiting = message_runs(post)
        write("the card")
        return waiting

    def confirm(waiting: Any) -> str:
        write("the claim")
        write("handle()'s work and its audit row")
        words = confirm_runs(waiting)
        write("the reply")
        return words

    return message, confirm, new_post


# --- Countersign ---


def countersign_side(database_url: str) -> tuple[Callable[[Any], Any], Callable[[Any], str], Callable[[], Any], Any]:
    """Countersign's message (→ the card, its token signed) and confirm (→ the continuation's words), in an app context."""
    env = env_for(database_url, TURNS_RUNNER="inline")
    env.pop("REDIS_URL", None)
    prepare(database_url, env)
    os.environ.update(env)
    import sqlalchemy as sa

    from app import copilot, create_app
    from app.copilot.approvals import sign
    from app.extensions import db
    from app.models import Approval, Conversation, Message, Post, User
    from app.status import Status

    app = create_app({"SWEEP_ON_START": False})
    context = app.app_context()
    context.push()
    copilot.engine().use_model(function_model())
    user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
    assert user is not None
    actor = copilot.person(user, "web")

    def new_post() -> Any:
        """A post to delete, and a new chat to ask in (not timed: opening a chat is not the approval)."""
        post = Post(tenant_id=user.tenant_id, author_id=user.id, title="Bench post")
        conversation = Conversation(tenant_id=user.tenant_id, user_id=user.id)
        db.session.add_all([post, conversation])
        db.session.commit()
        return post.id, conversation

    def message(fresh: Any) -> Any:
        post, conversation = fresh
        _, run = copilot.send_message(conversation, actor, f"Please delete post {post}.")
        card = db.session.scalar(sa.select(Approval).where(Approval.run_id == run.id, Approval.status == Status.PENDING))
        assert card is not None, "no card: the message's pass did not pause"
        assert {r["label"]: r["value"] for r in card.rows}["Post"] == "Bench post", card.rows
        return conversation.id, card.id, sign(card, actor.binding)

    def confirm(waiting: Any) -> str:
        conversation, card, token = waiting
        decided = copilot.answer(card, token, actor, "confirm")
        assert decided.status == Status.DONE, decided.status
        words = db.session.scalar(
            sa.select(Message.text)
            .where(Message.conversation_id == conversation, Message.role == "assistant")
            .order_by(Message.id.desc())
            .limit(1)
        )
        return str(words)

    return message, confirm, new_post, context


def run(n: int, database_url: str, warm: int = 20) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="countersign-p6-"))
    ours = countersign_side(database_url)
    sides: dict[str, tuple[Callable[[Any], Any], Callable[[Any], str], Callable[[], Any]]] = {
        "countersign": ours[:3],
        "langgraph": langgraph_side(folder),
        "pydantic_ai": pydantic_ai_side(folder),
        "floor": floor_side(),
        "durable_floor": durable_floor_side(folder),
    }
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(warm + n):
        for name in names[i % len(names) :] + names[: i % len(names)]:  # a rotating order: none always first or last
            message, confirm, new_post = sides[name]
            fresh = new_post()  # not timed: the post the approval deletes (and Countersign's new chat)
            start = time.perf_counter()
            words = confirm(message(fresh))
            elapsed = time.perf_counter() - start
            assert words == FINAL, f"{name}: the resumed run ended with {words!r}"
            if i >= warm:
                times[name].append(elapsed)
    ours[3].pop()
    figures = {name: percentiles(samples) for name, samples in times.items()}
    return {
        "bench": "P6",
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "n": n,
        **figures,
        "ratio_langgraph_median": figures["countersign"]["p50_ms"] / figures["langgraph"]["p50_ms"],
        "ratio_langgraph_p95": figures["countersign"]["p95_ms"] / figures["langgraph"]["p95_ms"],
        "ratio_pydantic_ai_median": figures["countersign"]["p50_ms"] / figures["pydantic_ai"]["p50_ms"],
        "ratio_pydantic_ai_p95": figures["countersign"]["p95_ms"] / figures["pydantic_ai"]["p95_ms"],
        "pydantic_ai_langgraph_median": figures["pydantic_ai"]["p50_ms"] / figures["langgraph"]["p50_ms"],
        "floor_langgraph_median": figures["floor"]["p50_ms"] / figures["langgraph"]["p50_ms"],
        "durable_floor_langgraph_median": figures["durable_floor"]["p50_ms"] / figures["langgraph"]["p50_ms"],
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--warm", type=int, default=20, help="approvals of each before the measured ones")
    parser.add_argument("--database-url", default=None, help="Countersign's database (default: a new SQLite file)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = run(args.n, args.database_url or temp_sqlite(), args.warm)
    if args.json:
        print(json.dumps(r))
        return
    print(f"P6 one approval in process: message → card → confirm → final words ({r['database']}, n={r['n']}, instant model)")
    sides = (
        ("countersign", "Countersign"),
        ("langgraph", "LangGraph"),
        ("pydantic_ai", "pydantic-ai"),
        ("floor", "floor"),
        ("durable_floor", "floor+writes"),
    )
    for name, label in sides:
        s = r[name]
        print(f"  {label:<12} median {s['p50_ms']:7.2f} ms   p95 {s['p95_ms']:7.2f} ms   p99 {s['p99_ms']:7.2f} ms")
    print(f"  ours ÷ LangGraph     median {r['ratio_langgraph_median']:.2f}x   p95 {r['ratio_langgraph_p95']:.2f}x")
    print(f"  ours ÷ pydantic-ai   median {r['ratio_pydantic_ai_median']:.2f}x   p95 {r['ratio_pydantic_ai_p95']:.2f}x")
    print(f"  pydantic-ai ÷ LangGraph median {r['pydantic_ai_langgraph_median']:.2f}x   (its history and the delete stored)")
    print(f"  floor ÷ LangGraph    median {r['floor_langgraph_median']:.2f}x   (pydantic-ai's two runs, nothing stored)")
    print(f"  floor+writes ÷ LangGraph median {r['durable_floor_langgraph_median']:.2f}x   (the five durable writes too)")
    print(f"  load average {r['load_average']}")


if __name__ == "__main__":
    main()
