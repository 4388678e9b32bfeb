"""bench/run.py's `--only`: prefixes of the figures' names, which hold commas themselves; and the
Redis databases the benchmarks empty, none of them the test suite's."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_run"]


@pytest.fixture(scope="module")
def names(run):
    return [f.name for _, _, every, *_ in run.plan(False, "postgresql://bench", "redis://127.0.0.1:6379") for f in every]


def test_a_comma_list_of_prefixes_is_several(run, names):
    assert run.prefixes(["L1 ours,P6"], names) == ("L1 ours", "P6")
    assert run.prefixes(["P4", "L1 turn,P3"], names) == ("P4", "L1 turn", "P3")  # the option again


def test_a_figures_own_name_with_its_commas_is_one_prefix(run, names):
    named = "P2 admin list, 100k rows ÷ 1k rows, median (SQLite)"
    assert named in names
    assert run.prefixes([named], names) == (named,)
    assert [n for n in names if n.startswith(run.prefixes([named], names))] == [named]


def test_a_prefix_that_starts_no_figure_is_refused_before_anything_runs(run, names):
    with pytest.raises(SystemExit, match="'L9' starts no figure"):
        run.prefixes(["L9"], names)
    with pytest.raises(SystemExit, match="'L1 ours,L9' starts no figure"):
        run.prefixes(["L1 ours,L9"], names)  # (not split: "L9" starts no name; whole, it starts none either)
    with pytest.raises(SystemExit, match="starts no figure"):
        run.prefixes(["P2 admin list, 7 rows"], names)


# The README's test command: Redis database 15 (scripts/services) down, 2 xdist workers a suite
# (scripts/test), two suites side by side.
SUITES_REDIS = set(range(15 - 2 * 2 + 1, 16))


def test_no_benchmark_empties_a_redis_database_of_the_test_suite(run):
    """The benchmarks flush their Redis databases first: on one of the suite's, a benchmark run
    beside the suite would empty its queues and waits, and its chat tests would see nothing come
    back."""
    planned = {
        int(a.rpartition("/")[2])
        for _, args, *_ in run.plan(False, "postgresql://bench", "redis://127.0.0.1:6379")
        for a in args
        if a.startswith("redis://")
    }
    defaults = {int(n) for f in BENCH.glob("*.py") for n in re.findall(r"6379/(\d+)", f.read_text())}
    assert planned and defaults, (planned, defaults)
    assert not (planned | defaults) & SUITES_REDIS, sorted((planned | defaults) & SUITES_REDIS)


def test_the_peer_keeping_its_two_writes_runs_beside_the_streamed_l1_on_sqlite_only(run):
    """L1, peer, the peer keeping the person's message and the reply (`peer_agui.py --durable`):
    beside the streamed L1 on SQLite, and no other; its figures read that run's own figures."""
    planned = run.plan(False, "postgresql://bench", "redis://127.0.0.1:6379")
    durable = [(args, beside) for script, args, _, *beside in planned if len(beside) > 1]
    assert len(durable) == 1
    args, (peer, durable_peer) = durable[0]
    assert "--streamed" in args and "--database-url" not in args
    assert peer == ("peer_agui.py", []) and durable_peer == ("peer_agui.py", ["--durable"])
    r = {
        "turn": {"p99_ms": 3300.0},
        "n": 200,
        "cpu_s": {"asgi": 4.4, "redis": 0.0},
        "peer": {"turn": {"p99_ms": 3000.0}, "cpu_per_turn_ms": 20.0},
        "peer_durable": {"turn": {"p99_ms": 3150.0}, "cpu_per_turn_ms": 22.0, "failures": {"total": 0}},
    }
    figures = {f.name: f.read(r) for f in run.floor_figures("SQLite, streamed")}
    assert figures["L1 peer keeping its 2 writes ÷ peer: turn end p99 (SQLite, streamed run)"] == pytest.approx(1.05)
    assert figures["L1 peer keeping its 2 writes ÷ peer: server CPU per turn (SQLite, streamed run)"] == pytest.approx(1.1)
    assert figures["L1 ours ÷ peer keeping its 2 writes: turn end p99 (SQLite, streamed)"] == pytest.approx(3300 / 3150)
    assert figures["L1 ours ÷ peer keeping its 2 writes: server CPU per turn (SQLite, streamed)"] == pytest.approx(1.0)
