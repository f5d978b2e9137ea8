"""``graphroute perf ppr-equivalence``: the local PPR solver against the exact one, question
by question, on an indexed group.

Each question runs through the route as shipped. Where the route's ``ppr`` stage runs, the
same seeds (and damping) are also handed to the stage with ``solver: push`` (at ``--eps``)
and to the stage with the route's own exact solver, both ranking ``top_k`` entities with no
relevance budget, and the two rankings are compared: the share of the exact top ``k``
entities the push ranks in its own top ``k``, the same for chunks by their PPR mass (what
``ppr_passages`` ranks), and what the push read. The route itself then continues with its
own solver, so the rest of the question is untouched.

Recall is the other half of the equivalence: ``graphroute bench ... --set ppr.solver=push``
against the same bench without it (docs/pages/scaling.md).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.apps.perf.perf import PPR_FIGURES
from graphroute.core.config.resolve import ResolvedParallel, ResolvedRoute, ResolvedStage


def _top_chunks(state: QueryState, k: int) -> list[str]:
    mass = state.node_scores
    top = getattr(mass, "top", None)
    return [c for c, _ in top(k)] if callable(top) else []


def compare_ppr_stage(
    base: type,
    rows: list[dict[str, Any]],
    *,
    eps: float,
    k: int,
    tolerance: float | None = -1.0,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> type:
    """A subclass of the ppr stage ``base`` that, before running as configured, ranks the
    question's seeds with the exact solver and with the push and appends the comparison to
    ``rows``."""

    class ComparedPPR(base):  # type: ignore[valid-type,misc]
        def run(self, state: QueryState, ctx: StageContext) -> None:
            p = self.params
            exact_solver = p.solver if p.solver != "push" else "direct"
            out: dict[str, Any] = {"question": state.question, "exact_solver": exact_solver}
            ranked: dict[str, tuple[list[str], list[str]]] = {}
            for name, params in (
                ("exact", p.model_copy(update={"solver": exact_solver, "push_above": None, "top_k": k, "budget": 1.0})),
                ("push", p.model_copy(update={"solver": "push", "push_eps": eps, "top_k": k, "budget": 1.0,
                                              **({} if tolerance == -1.0 else {"push_tolerance": tolerance})})),
            ):
                probe = replace(state, seeds=list(state.seeds), seed_arrays=list(state.seed_arrays),
                                entities=[], node_scores={})
                pctx = StageContext(services=ctx.services, stage_id=ctx.stage_id)
                t = time.perf_counter()
                base(params).run(probe, pctx)
                out[f"{name}_ms"] = (time.perf_counter() - t) * 1000.0
                ranked[name] = ([e.id for e in probe.entities], _top_chunks(probe, k))
                if name == "push":
                    for key in (*PPR_FIGURES, "ranked_error", "certified", "engine"):
                        out[key] = pctx.stats.get(key)
            (ex_e, ex_c), (pu_e, pu_c) = ranked["exact"], ranked["push"]
            out["entity_overlap"] = len(set(ex_e) & set(pu_e)) / len(ex_e) if ex_e else None
            out["chunk_overlap"] = len(set(ex_c) & set(pu_c)) / len(ex_c) if ex_c else None
            out["same_entity_order"] = ex_e == pu_e
            rows.append(out)
            if on_row is not None:
                on_row(out)
            super().run(state, ctx)

    return ComparedPPR


def with_compared_ppr(
    route: ResolvedRoute,
    rows: list[dict[str, Any]],
    *,
    eps: float,
    k: int,
    tolerance: float | None = -1.0,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> ResolvedRoute:
    """``route`` with every ``ppr`` stage replaced by :func:`compare_ppr_stage`."""

    def swap(rs: ResolvedStage) -> ResolvedStage:
        if rs.cls.name != "ppr" or not rs.spec.enabled:
            return rs
        return replace(rs, cls=compare_ppr_stage(rs.cls, rows, eps=eps, k=k, tolerance=tolerance, on_row=on_row))

    entries = [
        replace(e, branches=[[swap(rs) for rs in b] for b in e.branches]) if isinstance(e, ResolvedParallel) else swap(e)
        for e in route.entries
    ]
    return replace(route, entries=entries)


def _mean(values: Sequence[float | None]) -> float | None:
    real = [float(v) for v in values if v is not None]
    return round(statistics.fmean(real), 4) if real else None


def _median(values: Sequence[float | None]) -> float | None:
    """The median of the values a question has (a question whose ppr stage had no seeds to
    rank from has no push figures)."""
    real = [float(v) for v in values if v is not None]
    return statistics.median(real) if real else None


def ppr_equivalence(
    gr: Any,
    routes: Sequence[str],
    questions: Sequence[str],
    *,
    eps: float,
    k: int = 10,
    tolerance: float | None = -1.0,
    on_row: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Per route: the comparison of every question whose route reached its ppr stage, and
    their means (``graphroute perf ppr-equivalence`` prints them). ``on_row(route, row)`` sees
    each question's comparison as soon as it is made, so a long run keeps what it measured."""
    from graphroute.core.query.runner import run_route

    services = gr.services()
    out: dict[str, Any] = {"eps": eps, "k": k, "tolerance": None if tolerance == -1.0 else tolerance, "backend": getattr(gr.store, "backend", ""), "routes": {}}
    for name in routes:
        rows: list[dict[str, Any]] = []
        row_seen = None if on_row is None else (lambda row, name=name: on_row(name, row))
        route = with_compared_ppr(gr.route(name), rows, eps=eps, k=k, tolerance=tolerance, on_row=row_seen)
        for q in questions:
            run_route(route, q, services)
        def col(key: str, rows: list[dict[str, Any]] = rows) -> list[Any]:
            return [r.get(key) for r in rows]
        out["routes"][name] = {
            "questions": len(rows),
            "exact_solver": rows[0]["exact_solver"] if rows else None,
            "push_engines": sorted({str(v) for v in col("engine") if v is not None}),
            "entity_overlap_mean": _mean(col("entity_overlap")),
            "entity_overlap_min": min((v for v in col("entity_overlap") if v is not None), default=None),
            "chunk_overlap_mean": _mean(col("chunk_overlap")),
            "same_entity_order": sum(bool(v) for v in col("same_entity_order")),
            "certified": sum(bool(v) for v in col("certified")),
            "ranked_error_max": max((v for v in col("ranked_error") if v is not None), default=None),
            "nodes_touched_p50": _median(col("nodes_touched")),
            "eps_p50": _median(col("eps")),
            "rows_read_p50": _median(col("rows_read")),
            "rounds_p50": _median(col("rounds")),
            "queries_p50": _median(col("queries")),  # store round trips
            "exact_ms_p50": _median(col("exact_ms")),
            "push_ms_p50": _median(col("push_ms")),
            "per_question": rows,
        }
    return out
