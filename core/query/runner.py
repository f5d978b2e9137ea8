"""Runs a resolved route for one question and records the trace.

Each stage gets a :class:`StageContext`; the runner times it, counts items in and out (the
size of the first slot it consumes and produces) and stores its stats and tokens in a
:class:`StageTrace`. Disabled stages appear in the trace with ``enabled: false`` so an A/B
report shows what was switched off. Parallel branches run on forked states, awaited together
(they overlap where a stage awaits, e.g. a remote model call; a stage that only has ``run``
holds the event loop until it returns), and are merged back (see :func:`merge_states`).
Such stages stay off worker threads: their work is mostly Python, which threads only
interleave (Route 5 on the embedded MuSiQue group: p50 28 ms threaded against 21-22), and
a Neo4j server on the same two cores answered overlapped calls no faster.
"""

from __future__ import annotations

import asyncio
import atexit
import selectors
import threading
import time
from collections.abc import Sequence
from typing import Any

from graphroute.core.api.constants import MODEL_LOAD, NOT_FOUND
from graphroute.core.api.models import Evidence, QueryResult, ScoredNode, StageTrace
from graphroute.core.api.stage import QueryState, Slot, StageContext
from graphroute.core.api.store import one_version_per_question
from graphroute.core.config.resolve import ResolvedParallel, ResolvedRoute, ResolvedStage
from graphroute.core.config.settings import DEFAULT_MAX_QUESTION_CHARS, MAX_QUESTION_ENV
from graphroute.core.errors import GraphRouteError, QuestionError, StageError
from graphroute.core.lib.deadline import check_deadline, deadline_in
from graphroute.core.lib.fusion import rrf_merge
from graphroute.core.lib.model_loads import watch_model_loads
from graphroute.core.query.services import Services


def _primary(slots: Sequence[Slot]) -> Slot | None:
    for s in slots:
        if s != Slot.QUERY:
            return s
    return slots[0] if slots else None


def check_question(question: str, limit: int = DEFAULT_MAX_QUESTION_CHARS) -> None:
    """The one question check of every entry point (CLI, Python API, HTTP): not blank and
    at most ``limit`` characters, else a :class:`QuestionError` (exit 2, HTTP 400) that says
    so without echoing the question."""
    if not question or not question.strip():
        raise QuestionError("the question is empty")
    if len(question) > limit:
        raise QuestionError(
            f"the question is {len(question):,} characters long; the limit is {limit:,} "
            f"(set {MAX_QUESTION_ENV} to change it)"
        )


def question_limit(services: Services) -> int:
    return int(getattr(services.settings, "max_question_chars", DEFAULT_MAX_QUESTION_CHARS))


async def _run_stage(rs: ResolvedStage, state: QueryState, services: Services) -> list[StageTrace]:
    """The stage's trace, preceded by one ``model_load`` entry per model it had to load
    (the first query of a process); the stage's own time leaves the loading out."""
    cls = rs.cls
    trace = StageTrace(stage=rs.spec.key, use=cls.name, kind=cls.kind.value, enabled=rs.spec.enabled)
    if not rs.spec.enabled:
        return [trace]
    check_deadline(rs.spec.key)
    cin, cout = _primary(cls.consumes), _primary(cls.produces)
    trace.items_in = state.size(cin) if cin else 0
    ctx = StageContext(services=services, stage_id=rs.spec.key)
    stage = cls(rs.params)
    with watch_model_loads() as watch:
        try:
            await stage.arun(state, ctx)
        except GraphRouteError:
            raise
        except Exception as exc:  # a bug: say which stage, keep the cause for GRAPHROUTE_DEBUG
            raise StageError(rs.spec.key, cls.name, exc) from exc
    trace.duration_ms = watch.seconds * 1000.0
    trace.items_out = state.size(cout) if cout else 0
    trace.stats = ctx.stats
    trace.tokens = ctx.tokens
    loads = [
        StageTrace(stage=f"load:{x.name}", use=MODEL_LOAD, kind=MODEL_LOAD, duration_ms=x.seconds * 1000.0,
                   stats={"for_stage": rs.spec.key})
        for x in watch.loads
    ]
    return [*loads, trace]


def _merge_evidence_union(lists: list[list[Evidence]]) -> list[Evidence]:
    best: dict[str, Evidence] = {}
    order: list[str] = []
    for items in lists:
        for e in items:
            cur = best.get(e.id)
            if cur is None:
                best[e.id] = e
                order.append(e.id)
            elif e.score > cur.score:
                best[e.id] = e
    return [best[i] for i in order]


def merge_states(base: QueryState, branches: list[QueryState], mode: str, rrf_k: int = 60) -> None:
    """Fold branch results into ``base``: names and seeds are unioned, entities keep their
    best score, evidence is unioned (or fused by RRF); a single-valued slot (tier weights,
    damping, node scores, the answer) takes the value of the last branch that produced it."""
    for b in branches:
        for n in b.seed_names:
            if n not in base.seed_names:
                base.seed_names.append(n)
    # branch states are forks (deep copies) dropped after the merge, so their seeds move into
    # ``base`` as they are: copying each one again cost ~10 ms for Route 5's ~1,000 seeds
    seen_seeds = {(s.tier, s.node_id, s.name) for s in base.seeds}
    for b in branches:
        for s in b.seeds:
            key = (s.tier, s.node_id, s.name)
            if key not in seen_seeds:
                seen_seeds.add(key)
                base.seeds.append(s)
    # seed arrays are immutable and shared, not copied, by a fork: one already in ``base``
    # comes back from every branch as the same object
    have_arrays = {id(a) for a in base.seed_arrays}
    for b in branches:
        for a in b.seed_arrays:
            if id(a) not in have_arrays:
                have_arrays.add(id(a))
                base.seed_arrays.append(a)
    ents: dict[str, ScoredNode] = {e.id: e for e in base.entities}
    for b in branches:
        for e in b.entities:
            if e.id not in ents or e.score > ents[e.id].score:
                ents[e.id] = e
    base.entities = sorted(ents.values(), key=lambda e: -e.score)
    lists = [b.evidence for b in branches]
    if mode == "rrf":
        base.evidence = rrf_merge(lists, rrf_k)
    else:
        base.evidence = _merge_evidence_union([base.evidence, *lists])
    for b in branches:
        base.tier_weights.update(b.tier_weights)
        if b.damping is not None:
            base.damping = b.damping
        if b.damping_rule is not None:
            base.damping_rule = b.damping_rule
        if b.node_scores:
            base.node_scores = b.node_scores
        if b.profile is not None:
            base.profile = b.profile
        base.extras.update(b.extras)
        if b.answer and not base.answer:
            base.answer, base.citations, base.negative = b.answer, b.citations, b.negative
            base.context, base.context_evidence = b.context, b.context_evidence


async def _run_branch(stages: list[ResolvedStage], state: QueryState, services: Services) -> list[StageTrace]:
    return [t for rs in stages for t in await _run_stage(rs, state, services)]


def _document_ranking(evidence: Sequence[Evidence]) -> list[str]:
    """Documents in the order their best evidence ranks (for passage recall@k)."""
    seen: set[str] = set()
    out: list[str] = []
    for e in evidence:
        key = e.document_id or e.id
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


async def arun_route(
    route: ResolvedRoute,
    question: str,
    services: Services,
    state: QueryState | None = None,
    *,
    timeout_s: float | None = None,
) -> QueryResult:
    """Run the route; pass a fresh ``state`` to read the blackboard afterwards (the seeds and
    ranked entities the result does not carry). With ``timeout_s``, stop it
    (QueryTimeoutError) at the first deadline check after that many seconds (see
    :mod:`graphroute.core.lib.deadline`)."""
    check_question(question, question_limit(services))
    with deadline_in(timeout_s), one_version_per_question():
        try:
            return await _arun_route(route, question, services, state)
        except StageError as exc:
            raise exc.in_route(route.name) from exc.cause


async def _arun_route(
    route: ResolvedRoute, question: str, services: Services, state: QueryState | None
) -> QueryResult:
    state = state if state is not None else QueryState(question=question, group=services.group)
    traces: list[StageTrace] = []
    t0 = time.perf_counter()
    for entry in route.entries:
        if isinstance(entry, ResolvedParallel):
            if not entry.spec.enabled:
                traces.extend(
                    StageTrace(stage=rs.spec.key, use=rs.cls.name, kind=rs.cls.kind.value, enabled=False)
                    for b in entry.branches
                    for rs in b
                )
                continue
            forks = [state.fork() for _ in entry.branches]
            results = await asyncio.gather(
                *(_run_branch(b, f, services) for b, f in zip(entry.branches, forks, strict=True))
            )
            for r in results:
                traces.extend(r)
            merge_states(state, forks, entry.spec.merge, entry.spec.rrf_k)
        else:
            traces.extend(await _run_stage(entry, state, services))
    answer = state.answer
    negative = state.negative
    if not answer and not state.evidence and not state.context_evidence:
        answer, negative = NOT_FOUND, True
    return QueryResult(
        question=question,
        route=route.name,
        group=services.group,
        answer=answer,
        negative=negative,
        citations=state.citations,
        evidence=state.context_evidence or state.evidence,
        context=state.context,
        trace=traces,
        duration_ms=(time.perf_counter() - t0) * 1000.0,
        ranking=_document_ranking(state.evidence or state.context_evidence),
    )


class _ThreadLoop:
    """The event loop :func:`run_route` runs on in one thread, closed when the thread ends.

    Its selector is ``poll``, not the default ``epoll``: an epoll set lives in the kernel and
    a forked child shares it (a library's ``multiprocessing`` worker, e.g. OpenVINO's
    telemetry where the user opted in to it). When the child's copy of the loop is closed or
    collected, its unregistering empties the parent's set too, and the parent's loop never
    again hears a worker thread finish: a stage in a thread (an LLM call) waits forever. A
    poll loop keeps its registrations in the process; it watches one wake-up socket here."""

    def __init__(self) -> None:
        self.loop = asyncio.SelectorEventLoop(getattr(selectors, "PollSelector", selectors.SelectSelector)())
        self.loop.set_exception_handler(_interrupts_reported_once)

    def close(self) -> None:
        """Cancel what is left, shut the loop down and close it (idempotent)."""
        loop = self.loop
        if loop.is_closed() or loop.is_running():
            return
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    def __del__(self) -> None:
        # not contextlib.suppress: at interpreter teardown module globals may already be gone
        try:  # noqa: SIM105
            self.close()
        except Exception:  # nothing left to report to
            pass


def _interrupts_reported_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's handler of errors nobody awaited: an interrupt (Ctrl-C) raised in a stage
    also stops :func:`run_route`, whose caller reports it; the task it stopped keeps it too,
    and asyncio's default handler would print it again, with a traceback, as "Task
    exception was never retrieved" when the task is collected. Anything else goes to the
    default handler."""
    if isinstance(context.get("exception"), KeyboardInterrupt | SystemExit):
        return
    loop.default_exception_handler(context)


_thread = threading.local()


def _thread_loop() -> _ThreadLoop:
    held: _ThreadLoop | None = getattr(_thread, "held", None)
    if held is None or held.loop.is_closed():
        held = _thread.held = _ThreadLoop()
    return held


@atexit.register
def _close_main_thread_loop() -> None:
    held: _ThreadLoop | None = getattr(_thread, "held", None)
    if held is not None:
        held.close()


def run_route(
    route: ResolvedRoute,
    question: str,
    services: Services,
    state: QueryState | None = None,
    *,
    timeout_s: float | None = None,
) -> QueryResult:
    """Synchronous entry point (CLI, benchmarks, the HTTP server's worker threads).

    Each thread keeps one event loop for all its calls (:class:`_ThreadLoop`): making,
    shutting down and closing a loop per question cost ~0.23 ms of Route 5's. A call that
    raises - a stage's error, or Ctrl-C - closes that loop, so no task of a broken question
    is left to run in the next one.

    Not ``asyncio.run``: on the main thread, Python 3.11's ``asyncio.run`` restores its SIGINT
    handler through ``signal.getsignal``, which formats an error message holding ``repr()``
    of the finished task - the whole QueryResult, ~2 ms per question for Route 5."""
    held = _thread_loop()
    try:
        return held.loop.run_until_complete(arun_route(route, question, services, state, timeout_s=timeout_s))
    except BaseException:
        _thread.held = None
        held.close()
        raise
