"""``graphroute perf`` at scale: a generated index in a store, the query routes on it, the
communities step on it, and the local PPR against the exact one (docs/pages/scaling.md).

* ``graph-gen``       write a generated index (:mod:`graphroute.core.apps.perf.graphgen`, no model)
* ``scale-query``     the query suite on a group, in a fresh process: p50 per route and per
                      stage, and the client's peak RSS (``--solver push`` or the routes' own)
* ``communities``     the communities index step alone on a group, in a fresh process: time
                      and peak RSS of reading the entity layer and of the detection
* ``ppr-equivalence`` the push against each route's exact solver, question by question

The parts that measure memory run in their own interpreter (``run_part_in_process``), so the
peak RSS they report is the client's alone.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from graphroute.core.lib.paths import default_cache_dir
from rich.console import Console

err = Console(stderr=True)


def _log(msg: str) -> None:
    err.print(f"[dim]{msg} (load {' '.join(f'{x:.1f}' for x in os.getloadavg())})[/]", highlight=False)


def _engine(store: str, group: str) -> Any:
    from graphroute.core.apps.perf.perf import _engine as engine

    return engine(store, group, default_cache_dir())


def part_communities(args: dict[str, Any]) -> dict[str, Any]:
    """The communities index step, alone, on ``args["group"]`` (all of it: the entity layer is
    read, communities detected, summaries made and embedded, the layer written back)."""
    from graphroute.core.api.components import IndexContext
    from graphroute.core.apps.perf.perf import (
        PhaseSampler,
        current_rss_mb,
        load_average,
        peak_rss_mb,
    )
    from graphroute.core.index.pipeline import Indexer
    from graphroute.core.lib.phases import observe_phases

    gr = _engine(args["store"], args["group"])
    indexer = Indexer(gr.store, args["group"], registry=gr.registry, settings=gr.settings)
    embedder = indexer.embedder()
    embedder.embed(["warm"], input_type="document")  # the model's memory before the clock
    out: dict[str, Any] = {"load_average_before": load_average(), "rss_after_model_mb": current_rss_mb()}
    ctx = IndexContext(store=gr.store, group=args["group"], registry=gr.registry, embedder=embedder,
                       profile=indexer.profile, settings=gr.settings)
    cls = gr.registry.index_steps.get("communities")
    sampler = PhaseSampler()
    with observe_phases(sampler):
        stats = cls(cls.Params()).run(ctx)
    out.update(stats=stats, rss_phases=sampler.finish(), peak_rss_mb=peak_rss_mb(), load_average_after=load_average())
    gr.close()
    return out


def _questions(gr: Any, group: str, n: int, file: Path | None) -> list[str]:
    """``n`` questions: from a question file, else those of the group's generated corpus."""
    if file is not None:
        data = json.loads(file.read_text(encoding="utf-8"))
        return [str(q["question"]) for q in data][:n]
    spec = gr.store.get_meta(group, "graphgen")
    if not spec:
        raise typer.BadParameter(f"group {group!r} was not written by graph-gen: give --questions-file")
    from graphroute.core.apps.perf.graphgen import GraphSpec, questions

    return questions(GraphSpec(**spec), n)


def _print(result: dict[str, Any], as_json: bool, out_file: Path | None) -> None:
    text = json.dumps(result, indent=2)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(text, encoding="utf-8")
    if as_json:
        print(text)
    else:  # for people: the brief figures as indented lines (--json and --out have everything)
        import yaml

        print(yaml.safe_dump(_brief(result), sort_keys=False, allow_unicode=True, width=120), end="")


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    """The figures a reader wants first (the JSON file has everything)."""
    routes = result.get("routes")
    if not isinstance(routes, dict):
        return result
    brief = {k: v for k, v in result.items() if k != "routes" and k != "rss_phases"}
    brief["routes"] = {
        name: {k: v for k, v in r.items() if k not in ("per_question", "stages_ms")}
        | ({"stages_p50_ms": {s: x["p50"] for s, x in r["stages_ms"].items()}} if "stages_ms" in r else {})
        for name, r in routes.items()
    }
    return brief


StoreOpt = Annotated[str, typer.Option("--store", metavar="DIR|URI", help="store directory or neo4j:// / bolt:// URI")]
GroupOpt = Annotated[str, typer.Option("--group", metavar="GROUP", help="the group")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the whole result")]
OutOpt = Annotated[Path | None, typer.Option("--out", metavar="FILE", help="also write the JSON result here")]
RoutesOpt = Annotated[list[str] | None, typer.Option("--route", metavar="ROUTE", help="route to query (repeatable)")]
QuestionsFileOpt = Annotated[
    Path | None, typer.Option("--questions-file", metavar="FILE", help="HippoRAG JSON; default: the generated corpus's"),
]


def graph_gen(
    store: StoreOpt,
    group: GroupOpt,
    sentences: Annotated[int, typer.Option("--sentences", min=1, metavar="N", help="sentences to generate")] = 1_000_000,
    topics: Annotated[int | None, typer.Option("--topics", metavar="N", help="default: one per 2,500 sentences")] = None,
    entities: Annotated[int | None, typer.Option("--entities", metavar="N", help="vocabulary; default: 0.3 per sentence")] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="random seed")] = 7,
    as_json: JsonOpt = False,
    out_file: OutOpt = None,
) -> None:
    """Write a generated index of SENTENCES sentences into a group (emptied first); no model runs."""
    from graphroute.core.apps.perf.graphgen import GraphSpec, write_graph

    spec = GraphSpec(sentences=sentences, topics=topics or max(4, sentences // 2_500),
                     entities=entities or max(1_000, int(sentences * 0.3)), seed=seed)
    gr = _engine(store, group)
    result = write_graph(gr.store, group, spec, log=_log)
    gr.close()
    _print(result, as_json, out_file)


def scale_query(
    store: StoreOpt,
    group: GroupOpt,
    route: RoutesOpt = None,
    questions: Annotated[int, typer.Option("--questions", min=1, metavar="N", help="questions to ask")] = 30,
    questions_file: QuestionsFileOpt = None,
    solver: Annotated[str, typer.Option("--solver", metavar="SOLVER", help="push, or 'route' for each route's own solver")] = "push",
    sets: Annotated[list[str] | None, typer.Option("--set", metavar="ID.PARAM=VALUE",
                                                   help="override a stage parameter of every route (repeatable)")] = None,
    phase_peaks: Annotated[bool, typer.Option(
        "--phase-peaks/--no-phase-peaks",
        help="each route's own peak RSS (resets the kernel's high-water mark, so /usr/bin/time -v then shows "
             "only the last route's peak; peak_rss_mb is the whole run's either way)")] = True,
    as_json: JsonOpt = False,
    out_file: OutOpt = None,
) -> None:
    """The query suite on a group in a fresh process: p50 per route and stage, peak RSS."""
    from graphroute.core.apps.perf.perf import load_average, run_part_in_process
    from graphroute.core.config.overrides import parse_value

    gr = _engine(store, group)
    qs = _questions(gr, group, questions, questions_file)
    gr.close()
    routes = route or ["route2_local", "route5_unified"]
    overrides: dict[str, Any] = {} if solver == "route" else {"ppr.solver": solver}
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise typer.BadParameter(f"bad --set {item!r}: write ID.PARAM=VALUE, e.g. --set ppr.push_tolerance=null")
        overrides[key] = parse_value(value)
    _log(f"scale-query: {len(qs)} questions x {routes} on {group} ({solver})")
    result = run_part_in_process("query", {"store": store, "group": group, "questions": qs, "routes": routes,
                                           "cache": str(default_cache_dir()),
                                           "overrides": overrides, "phase_peaks": phase_peaks})
    result["solver"] = solver
    result["overrides"] = overrides
    result["load_average_end"] = load_average()
    _print(result, as_json, out_file)


def communities(store: StoreOpt, group: GroupOpt, as_json: JsonOpt = False, out_file: OutOpt = None) -> None:
    """The communities index step alone on a group, in a fresh process: time and peak RSS."""
    from graphroute.core.apps.perf.perf import run_part_in_process

    _print(run_part_in_process("communities", {"store": store, "group": group}, module=__name__), as_json, out_file)


def ppr_equivalence(
    store: StoreOpt,
    group: GroupOpt,
    route: RoutesOpt = None,
    questions: Annotated[int, typer.Option("--questions", min=1, metavar="N", help="questions to ask")] = 100,
    questions_file: QuestionsFileOpt = None,
    eps: Annotated[float | None, typer.Option("--eps", metavar="EPS", help="push_eps; default the ppr stage's")] = None,
    tolerance: Annotated[float | None, typer.Option("--tolerance", metavar="FRACTION", help="push_tolerance; 0: none; default the stage's")] = None,
    as_json: JsonOpt = False,
    out_file: OutOpt = None,
) -> None:
    """Top-10 entities and chunks of the push against each route's exact solver, per question.
    With ``--out FILE``, each question's comparison is also appended to ``FILE.rows.jsonl`` as it
    is made."""
    from graphroute.core.apps.perf.ppr_equivalence import ppr_equivalence as compare
    from graphroute.plugins.expanders.graph import DEFAULT_PUSH_EPS

    gr = _engine(store, group)
    qs = _questions(gr, group, questions, questions_file)
    tol: float | None = -1.0 if tolerance is None else (tolerance or None)
    keep = None
    if out_file is not None:
        rows_file = Path(f"{out_file}.rows.jsonl")
        rows_file.write_text("")

        def keep(route_name: str, row: dict[str, Any]) -> None:
            with rows_file.open("a") as fh:
                fh.write(json.dumps({"route": route_name, **row}, default=str) + "\n")

    result = compare(gr, route or ["route2_local", "route5_unified"], qs, eps=eps or DEFAULT_PUSH_EPS, tolerance=tol, on_row=keep)
    gr.close()
    _print(result, as_json, out_file)


def register(app: typer.Typer) -> None:
    """The scale subcommands of ``graphroute perf``."""
    app.command("graph-gen")(graph_gen)
    app.command("scale-query")(scale_query)
    app.command("communities")(communities)
    app.command("ppr-equivalence")(ppr_equivalence)


if __name__ == "__main__":
    from graphroute.core.apps.perf.perf import part_main

    raise SystemExit(part_main(sys.argv[1:], {"communities": part_communities}))
