"""``graphroute bench``, ``ab`` and ``ablate``: the benchmark commands.

Thin typer layer over :mod:`graphroute.core.apps.bench.bench`; core/cli.py calls :func:`register`.
Figures go to stdout (a table, or JSON with ``--json``); progress bars go to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from graphroute.core.apps.options import DisableOpt, EnableOpt, JsonOpt, SetOpt
from graphroute.core.config.overrides import Overrides, overrides_from_cli
from graphroute.core.errors import RouteConfigError
from graphroute.core.hookspecs import hookimpl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# wide tables stay readable when stdout is a file or a pipe (rich would assume 80 columns)
out = Console() if sys.stdout.isatty() else Console(width=240)
err = Console(stderr=True)

QuestionsOpt = Annotated[Path, typer.Option("--questions", "-q", metavar="FILE", help="question file: HippoRAG JSON or JSONL (docs/benchmarking.md)")]
CorpusOpt = Annotated[Path, typer.Option("--corpus", "-c", metavar="FILE", help="corpus: JSON list (or JSONL) of {title, text}")]
StoreOpt = Annotated[str | None, typer.Option("--store", metavar="DIR|URI", help="bench store directory or neo4j:// URI [default ./.graphroute/bench]")]
OutOpt = Annotated[Path | None, typer.Option("--out", metavar="DIR", help="write JSON, a Markdown report and each question's record to this folder (bench: plots too, with graphroute[bench])")]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, metavar="N", help="only the first N questions")]
AnswerableOpt = Annotated[bool, typer.Option(
    "--answerable-only", help="leave out the questions marked unanswerable (measure retrieval without 'not found')")]
ProfileOpt = Annotated[str | None, typer.Option("--profile", metavar="PROFILE", help="index profile name or YAML path [default: default]")]
TolOpt = Annotated[float, typer.Option("--tolerance", min=0.0, metavar="FRACTION", help="verdict: allowed drop of recall@5 and containment")]
F1TolOpt = Annotated[float, typer.Option("--f1-tolerance", min=0.0, metavar="FRACTION", help="verdict: allowed drop of f1")]
TokenCutOpt = Annotated[float, typer.Option("--min-token-cut", min=0.0, max=1.0, metavar="FRACTION", help="verdict: relative token cut that counts as a gain")]
SpeedGainOpt = Annotated[float, typer.Option("--min-speed-gain", min=0.0, max=1.0, metavar="FRACTION", help="verdict: relative p50 latency cut that counts as a gain")]


def _load(questions: Path, corpus: Path, limit: int | None, answerable_only: bool = False) -> Any:
    from dataclasses import replace

    from graphroute.core.apps.bench.datasets import load_dataset
    from graphroute.core.errors import DatasetError, UserError

    try:
        dataset = load_dataset(questions, corpus, limit=limit)
    except DatasetError as exc:
        raise UserError(str(exc)) from None
    if answerable_only:
        dataset = replace(dataset, questions=[q for q in dataset.questions if q.answerable])
    return dataset


def _runner(dataset: Any, store: str | None, profile: str | None, out_dir: Path | None = None) -> Any:
    """The bench runner, its group not indexed yet (:func:`_prepare`, once the routes are
    checked); with ``out_dir``, every question's record is also appended to
    ``out_dir/records.jsonl`` as it is scored (a run that fails late keeps them)."""
    from graphroute.core.apps.bench.bench import DEFAULT_BENCH_STORE, BenchRunner

    records = None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        records = out_dir / "records.jsonl"
        records.write_text("", encoding="utf-8")
    return BenchRunner(dataset, store=store or DEFAULT_BENCH_STORE, profile=profile, records_file=records)


def _prepare(runner: Any) -> None:
    """Index the runner's group (or find it current) and say which it was. Commands call it
    after every route is read and checked, so a typo costs no indexing run."""
    dataset = runner.dataset
    info = runner.prepare()
    how = "cached, indexing skipped" if info.cached else f"indexed in {info.seconds:.1f} s"
    err.print(f"[dim]group {escape(info.group)} ({how}; {len(dataset.corpus)} passages)[/]", highlight=False)
    if dataset.unresolved_gold:
        shown = ", ".join(dataset.unresolved_refs[:10]) + (", ..." if dataset.unresolved_gold > 10 else "")
        err.print(f"[yellow]warning:[/] {dataset.unresolved_gold} gold passage references match no corpus entry: "
                  f"{escape(shown)}", highlight=False, soft_wrap=True)


def _variants_for(routes: list[str], ov: Overrides) -> list[Any]:
    """One variant per route; each gets the overrides that name its stages."""
    from graphroute.core.apps.bench.bench import Variant, overrides_for

    variants = []
    unused: set[str] | None = None
    for r in routes:
        sub, unknown = overrides_for(r, ov)
        unused = unknown if unused is None else unused & unknown
        variants.append(Variant(r, r, sub))
    if unused:
        raise RouteConfigError(
            f"overrides name stage id(s) {', '.join(sorted(unused))}, which none of the routes has",
            fix="`graphroute routes show ROUTE` lists a route's stage ids",
        )
    return variants


def _metrics_table(title: str, routes: dict[str, dict[str, Any]], columns: tuple[str, ...]) -> Table:
    from graphroute.core.apps.bench.report import fmt

    t = Table(title=title)
    t.add_column("route")
    for c in columns:
        t.add_column(c, justify="right")
    for name, m in routes.items():
        t.add_row(name, *(fmt(m.get(c)) for c in columns))
    return t


def bench(
    questions: QuestionsOpt,
    corpus: CorpusOpt,
    route: Annotated[list[str], typer.Option("--route", "-r", metavar="ROUTE", help="route name or YAML path (repeatable)")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    out_dir: OutOpt = None,
    limit: LimitOpt = None,
    answerable_only: AnswerableOpt = False,
    profile: ProfileOpt = None,
    set_: SetOpt = None,
    disable: DisableOpt = None,
    enable: EnableOpt = None,
) -> None:
    """Index a corpus (cached by content hash) and measure routes on its questions."""
    from graphroute.core.apps.bench.bench import bench_json
    from graphroute.core.apps.bench.report import NEGATIVE_COLUMNS, SUMMARY_COLUMNS, write_bench

    ov = overrides_from_cli(set_ or [], disable or [], enable or [])
    variants = _variants_for(route, ov)
    dataset = _load(questions, corpus, limit, answerable_only)
    runner = _runner(dataset, store, profile, out_dir)
    try:
        for v in variants:  # fail on a bad route before indexing or running any
            runner.resolve(v)
        _prepare(runner)
        runs = runner.run_variants(variants)
        data = bench_json(runner, runs)
    finally:
        runner.close()
    if out_dir is not None:
        files = write_bench(data, out_dir)
        err.print(f"[dim]wrote {escape(', '.join(str(f) for f in files))}[/]", highlight=False)
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    out.print(_metrics_table(f"bench: {data['dataset']['name']}", data["routes"], SUMMARY_COLUMNS))
    if data["dataset"].get("unanswerable"):
        out.print(_metrics_table("answerable vs unanswerable", data["routes"], NEGATIVE_COLUMNS))
    _print_llm(data["routes"])


def _print_llm(routes: dict[str, dict[str, Any]]) -> None:
    """The LLM columns of the routes that called a model, and which model answered."""
    from .report import LLM_COLUMNS, llm_routes

    used = llm_routes(routes)
    if not used:
        return
    out.print(_metrics_table("LLM answers (calls and tokens per question; USD per 1,000 questions and in total)", used, LLM_COLUMNS))
    for name, m in used.items():
        if m.get("llm_model"):
            out.print(f"{name}: answered by {m['llm_model']}", highlight=False)


def ab(
    questions: QuestionsOpt,
    corpus: CorpusOpt,
    route: Annotated[list[str], typer.Option("--route", "-r", metavar="ROUTE", help="route A, then route B (give one route to compare it with its --b-* overrides)")],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    out_dir: OutOpt = None,
    limit: LimitOpt = None,
    answerable_only: AnswerableOpt = False,
    profile: ProfileOpt = None,
    set_: SetOpt = None,
    disable: DisableOpt = None,
    enable: EnableOpt = None,
    b_set: Annotated[list[str] | None, typer.Option("--b-set", metavar="ID.PARAM=VALUE", help="B only: override a stage parameter")] = None,
    b_disable: Annotated[list[str] | None, typer.Option("--b-disable", metavar="ID", help="B only: switch a stage off")] = None,
    b_enable: Annotated[list[str] | None, typer.Option("--b-enable", metavar="ID", help="B only: switch a stage on")] = None,
    tolerance: TolOpt = 0.01,
    f1_tolerance: F1TolOpt = 0.01,
    min_token_cut: TokenCutOpt = 0.05,
    min_speed_gain: SpeedGainOpt = 0.10,
) -> None:
    """Compare two routes (or one route and its --b-* overrides): wins/losses, deltas, verdict."""
    from graphroute.core.apps.bench.bench import (
        SAME_CONFIGURATION,
        Variant,
        VerdictRule,
        overrides_for,
        run_ab,
        same_configuration,
    )
    from graphroute.core.apps.bench.report import ab_markdown, write_doc
    from graphroute.core.config.resolve import idle_overrides
    from graphroute.core.errors import UserError

    if len(route) not in (1, 2):
        raise UserError("give --route A --route B, or one --route with --b-set/--b-disable/--b-enable")
    base = overrides_from_cli(set_ or [], disable or [], enable or [])
    b_only = overrides_from_cli(b_set or [], b_disable or [], b_enable or [])
    if len(route) == 1 and b_only.is_empty():
        raise UserError("with one --route, say what B changes: --b-set, --b-disable or --b-enable")
    route_a, route_b = route[0], route[-1]
    a_ov, a_unknown = overrides_for(route_a, base)
    b_base, _ = overrides_for(route_b, base)
    b_ov, b_unknown = overrides_for(route_b, base.merged(b_only))
    unknown = (a_unknown & b_unknown) | (b_unknown & set(b_only.enabled) | {k[0] for k in b_only.params} & b_unknown)
    if unknown:
        raise RouteConfigError(
            f"overrides name stage id(s) {', '.join(sorted(unknown))}, which the route(s) do not have",
            fix="`graphroute routes show ROUTE` lists a route's stage ids",
        )
    label_a = f"A:{route_a}"
    label_b = f"B:{route_b}" + ("" if b_only.is_empty() else "*")
    va, vb = Variant(label_a, route_a, a_ov), Variant(label_b, route_b, b_ov)
    rule = VerdictRule(tolerance=tolerance, f1_tolerance=f1_tolerance, min_token_cut=min_token_cut,
                       min_speed_gain=min_speed_gain)
    dataset = _load(questions, corpus, limit, answerable_only)
    runner = _runner(dataset, store, profile, out_dir)
    try:
        # before the first question: what of B's own overrides changes nothing, and whether B
        # as a whole runs exactly what A runs (then only A is run: the verdict is SAME)
        notes = idle_overrides(runner.engine.route(route_b, b_base), runner.resolve(vb), b_only, prefix="--b-")
        runner.resolve(va)
        _prepare(runner)
        if same_configuration(runner, va, vb):
            notes.append(f"{SAME_CONFIGURATION}; the verdict is SAME")
        for note in notes:
            err.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)
        cmp = run_ab(runner, va, vb, rule)
        cmp["notes"] = notes
    finally:
        runner.close()
    if out_dir is not None:
        files = write_doc(out_dir, "ab", cmp, ab_markdown(cmp))
        err.print(f"[dim]wrote {escape(', '.join(str(f) for f in files))}[/]", highlight=False)
    if as_json:
        print(json.dumps(cmp, indent=2, ensure_ascii=False))
        return
    from graphroute.core.apps.bench.report import fmt

    t = Table(title=f"A/B: {label_a} vs {label_b}")
    for c in ("metric", "A", "B", "B - A"):
        t.add_column(c, justify="right" if c != "metric" else "left")
    for key, d in cmp["deltas"].items():
        t.add_row(key, fmt(cmp["a"]["metrics"].get(key)), fmt(cmp["b"]["metrics"].get(key)), "-" if d is None else f"{d:+.4f}")
    out.print(t)
    for key, wlt in cmp["per_question"].items():
        out.print(f"{key}: B wins {wlt['wins']}, losses {wlt['losses']}, ties {wlt['ties']}", highlight=False)
    out.print(f"[bold]verdict: {cmp['verdict']}[/] ({'; '.join(cmp['reasons']) or '-'})", highlight=False)
    out.print(f"[dim]rule: {cmp['rule']}[/]", highlight=False)


def ablate(
    route: Annotated[str, typer.Option("--route", "-r", metavar="ROUTE", help="route name or YAML path")],
    questions: QuestionsOpt,
    corpus: CorpusOpt,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    out_dir: OutOpt = None,
    limit: LimitOpt = None,
    answerable_only: AnswerableOpt = False,
    profile: ProfileOpt = None,
    set_: SetOpt = None,
    disable: DisableOpt = None,
    enable: EnableOpt = None,
    tolerance: TolOpt = 0.01,
    f1_tolerance: F1TolOpt = 0.01,
    min_token_cut: TokenCutOpt = 0.05,
    min_speed_gain: SpeedGainOpt = 0.10,
    stage: Annotated[list[str] | None, typer.Option(
        "--stage", metavar="ID", help="ablate this stage id (repeatable; any kind) instead of the route's denoisers")] = None,
) -> None:
    """Sequential ablation: all toggleable stages off, then each enabled in order, KEEP, REVERT or SAME."""
    from graphroute.core.apps.bench.bench import VerdictRule, ablation_plan
    from graphroute.core.apps.bench.bench import ablate as run_ablation
    from graphroute.core.apps.bench.report import ablate_markdown, ablate_rows, write_doc

    base = overrides_from_cli(set_ or [], disable or [], enable or [])
    rule = VerdictRule(tolerance=tolerance, f1_tolerance=f1_tolerance, min_token_cut=min_token_cut,
                       min_speed_gain=min_speed_gain)
    dataset = _load(questions, corpus, limit, answerable_only)
    runner = _runner(dataset, store, profile, out_dir)
    try:
        given = None if base.is_empty() else base
        plan = ablation_plan(runner, route, given, stage or ())  # checks the route and --stage before indexing
        _prepare(runner)
        result = run_ablation(runner, route, base=given, rule=rule, stages=stage or (), plan=plan)
    finally:
        runner.close()
    if out_dir is not None:
        files = write_doc(out_dir, "ablate", result, ablate_markdown(result))
        err.print(f"[dim]wrote {escape(', '.join(str(f) for f in files))}[/]", highlight=False)
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    from graphroute.core.apps.bench.report import ABLATE_COLUMNS, fmt

    t = Table(title=f"ablation: {route}")
    for c in ("step", "stage", *ABLATE_COLUMNS, "verdict"):
        t.add_column(c)
    for row in ablate_rows(result):
        t.add_row(*(fmt(v) for v in row))
    out.print(t)
    out.print(f"required (kept on): {', '.join(result['required']) or 'none'}", highlight=False)
    out.print(f"kept: {', '.join(result['kept']) or 'none'}; reverted: {', '.join(result['reverted']) or 'none'}; "
              f"same quality (left off): {', '.join(result['same']) or 'none'}", highlight=False)
    out.print(f"final overrides: {escape(' '.join(result['final_overrides'])) or 'none'}", highlight=False)
    out.print(f"[dim]rule: {result['rule']}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the benchmark commands to the ``graphroute`` CLI."""
    app.command("bench")(bench)
    app.command("ab")(ab)
    app.command("ablate")(ablate)


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    register(cli)
