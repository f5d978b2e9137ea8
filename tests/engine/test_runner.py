"""The runner: trace contents, disabled stages, parallel branches and their merge."""

from __future__ import annotations

import gc
import json
import os
import textwrap
import threading
from pathlib import Path

import pytest
from graphroute.core.api.models import Evidence
from graphroute.core.api.stage import QueryState
from graphroute.core.api.store import GraphStore
from graphroute.core.config.overrides import overrides_from_cli
from graphroute.core.config.resolve import load_route
from graphroute.core.engine import open_store
from graphroute.core.errors import StageError
from graphroute.core.query import runner
from graphroute.core.query.runner import merge_states, run_route
from graphroute.core.query.services import Services
from graphroute.core.registry import Registry, build_registry

from tests.engine import stages as test_stages


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry(extra_plugins=[test_stages])


@pytest.fixture()
def services(tmp_path: Path, registry: Registry) -> Services:
    store: GraphStore = open_store(str(tmp_path / "store"), registry=registry)
    return Services(store, "g", registry=registry)


def route_file(tmp_path: Path, text: str) -> str:
    p = tmp_path / "r.yaml"
    p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return str(p)


LINEAR = """
name: linear
stages:
  - {use: t_fixed, id: fixed, with: {n: 5}}
  - {use: t_keep, id: keep, with: {n: 2}}
  - {use: t_echo, id: synth}
"""


def test_trace_records_every_stage(tmp_path: Path, registry: Registry, services: Services) -> None:
    route = load_route(route_file(tmp_path, LINEAR), registry, environ={})
    result = run_route(route, "q?", services)
    assert [t.stage for t in result.trace] == ["fixed", "keep", "synth"]
    fixed, keep, synth = result.trace
    assert (fixed.kind, fixed.items_in, fixed.items_out) == ("expander", 0, 5)  # consumes only the query
    assert (keep.items_in, keep.items_out, keep.stats) == (5, 2, {"dropped": 3})
    assert synth.tokens == {"prompt": 7, "completion": 3}
    assert all(t.duration_ms >= 0 for t in result.trace)
    assert result.answer == "e0 e1"
    payload = result.to_public_json()
    json.dumps(payload)  # serialisable
    assert set(payload) >= {"answer", "citations", "evidence", "trace"}
    assert set(payload["evidence"][0]) >= {"id", "text", "score", "document", "section_path", "source"}
    assert set(payload["trace"][0]) >= {"stage", "duration_ms", "items_in", "items_out", "stats"}


def test_disabled_stage_is_skipped_and_shown(tmp_path: Path, registry: Registry, services: Services) -> None:
    route = load_route(route_file(tmp_path, LINEAR), registry, overrides=overrides_from_cli(disable=["keep"]), environ={})
    result = run_route(route, "q?", services)
    keep = result.trace[1]
    assert keep.enabled is False and keep.duration_ms == 0 and keep.items_out == 0
    assert result.answer == "e0 e1 e2 e3 e4"


def test_parallel_branches_merge_by_union(tmp_path: Path, registry: Registry, services: Services) -> None:
    route = load_route(
        route_file(
            tmp_path,
            """
            name: par
            stages:
              - parallel:
                  - [{use: t_fixed, id: a, with: {prefix: a, n: 2}}]
                  - [{use: t_fixed, id: b, with: {prefix: b, n: 2, start: 2.0}}, {use: t_keep, id: kb, with: {n: 1}}]
              - {use: t_echo, id: synth}
            """,
        ),
        registry,
        environ={},
    )
    result = run_route(route, "q?", services)
    assert [t.stage for t in result.trace] == ["a", "b", "kb", "synth"]
    assert result.answer == "a0 a1 b0"  # branch order kept, branch b trimmed to one


def test_rrf_merge_rewards_agreement() -> None:
    base = QueryState(question="q", group="g")
    b1 = QueryState(question="q", group="g", evidence=[Evidence(id="x", text="", score=9.0), Evidence(id="y", text="", score=8.0)])
    b2 = QueryState(question="q", group="g", evidence=[Evidence(id="y", text="", score=0.9), Evidence(id="z", text="", score=0.8)])
    merge_states(base, [b1, b2], "rrf", rrf_k=60)
    assert [e.id for e in base.evidence] == ["y", "x", "z"]  # y is in both lists
    assert base.evidence[0].score == pytest.approx(1 / 62 + 1 / 61)


def test_union_merge_keeps_best_score() -> None:
    base = QueryState(question="q", group="g")
    b1 = QueryState(question="q", group="g", evidence=[Evidence(id="x", text="", score=0.2)])
    b2 = QueryState(question="q", group="g", evidence=[Evidence(id="x", text="", score=0.7), Evidence(id="w", text="", score=0.1)])
    merge_states(base, [b1, b2], "union")
    assert [(e.id, e.score) for e in base.evidence] == [("x", 0.7), ("w", 0.1)]


def test_no_evidence_means_not_found(tmp_path: Path, registry: Registry, services: Services) -> None:
    route = load_route(route_file(tmp_path, "name: none\nstages:\n  - {use: t_fixed, with: {n: 0}}\n"), registry, environ={})
    result = run_route(route, "q?", services)
    assert result.negative is True and "not found" in result.answer.lower()


def test_run_route_keeps_a_loop_per_thread_and_a_failure_closes_it(
    tmp_path: Path, registry: Registry, services: Services
) -> None:
    route = load_route(route_file(tmp_path, "name: loops\nstages:\n  - {use: t_loop}\n"), registry, environ={})
    test_stages.LOOPS.clear()
    run_route(route, "one", services)
    run_route(route, "two", services)
    first, again = test_stages.LOOPS
    assert again is first and not first.is_closed()  # one loop for the thread's calls
    with pytest.raises(StageError) as failed:
        run_route(route, "boom", services)
    # the stage, its plugin name and the route are named; the cause is kept
    assert str(failed.value) == "stage 't_loop' (`t_loop`) of route 'loops' failed: RuntimeError: boom"
    assert isinstance(failed.value.__cause__, RuntimeError) and failed.value.exit_code == 1
    assert first.is_closed() and test_stages.PENDING[-1].cancelled()  # its pending task cancelled
    run_route(route, "three", services)
    assert test_stages.LOOPS[-1] is not first and not test_stages.LOOPS[-1].is_closed()
    # another thread has a loop of its own, closed when the thread ends
    worker = threading.Thread(target=run_route, args=(route, "four", services))
    worker.start()
    worker.join()
    gc.collect()
    theirs = test_stages.LOOPS[-1]
    assert theirs is not test_stages.LOOPS[-2] and theirs.is_closed()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_the_parents_loop_alone(tmp_path: Path, registry: Registry, services: Services) -> None:
    """A library's forked worker (OpenVINO's telemetry forks one where it is on) drops
    the thread loops it inherited when it ends; the parent's loop must still hear its
    worker threads finish, or a stage in a thread (an LLM call) waits forever."""
    route = load_route(route_file(tmp_path, "name: threaded\nstages:\n  - {use: t_thread}\n"), registry, environ={})
    test_stages.THREADED.clear()

    def questions() -> None:
        run_route(route, "one", services)  # this thread's loop now exists
        pid = os.fork()
        if pid == 0:  # the child: what a multiprocessing worker's end does to the thread-locals
            try:
                runner._thread.held = None
                gc.collect()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        run_route(route, "two", services)

    asking = threading.Thread(target=questions, daemon=True)
    asking.start()
    asking.join(timeout=60)
    assert not asking.is_alive(), "the second question never heard its worker thread finish"
    assert test_stages.THREADED == ["one", "two"]
