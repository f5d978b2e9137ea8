"""The core commands: ``plugins``, ``routes``, ``query``, ``index``, ``stats`` and ``demo``.

They are a default command plugin: :func:`register_commands` adds them to the CLI through the
same hook a third-party package uses to add its own. Heavy imports (the engine, models) happen
inside each command, so ``graphroute --help`` stays fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from graphroute.core.api.constants import DEFAULT_ROUTE
from graphroute.core.api.models import QueryResult
from graphroute.core.apps.cli.main import engine, err, on_interrupt, out, warn
from graphroute.core.apps.options import (
    DisableOpt,
    EnableOpt,
    GroupOpt,
    JsonOpt,
    RouteOpt,
    SetOpt,
    StoreOpt,
)
from graphroute.core.config.overrides import overrides_from_cli
from graphroute.core.config.resolve import idle_overrides, load_route
from graphroute.core.config.route import list_routes
from graphroute.core.errors import UserError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.index.manage import require_group
from graphroute.core.registry import BUILTIN_PACKAGE, get_registry, skipped_builtins
from rich import box
from rich.markup import escape
from rich.table import Table

commands = typer.Typer()

# The demo's documents and questions ship inside the package, so `graphroute demo` runs anywhere.
SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "sample"
routes_app = typer.Typer(
    help="List shipped and user routes, or show one fully resolved.", invoke_without_command=True, rich_markup_mode=None
)


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    cli.registered_commands.extend(commands.registered_commands)
    cli.add_typer(routes_app, name="routes")


# --------------------------------------------------------------------------- plugins


@commands.command()
def plugins(as_json: JsonOpt = False) -> None:
    """Show installed plugins, the stages and components each contributes, and broken ones."""
    reg = get_registry(keep_broken=True)  # the one command that lists a broken plugin instead of stopping
    rows = reg.plugins()
    if as_json:
        print(json.dumps({"plugins": rows, "skipped": skipped_builtins(), "disabled": reg.disabled}, indent=2))
    else:
        # One line per component: its first docstring line is cut to what the terminal leaves
        # it, and left out below 24 columns (whole descriptions and the parameters are in --json).
        labels = {r["name"]: plugin_label(r) for r in rows}
        comps = [c for r in rows for c in r["components"]]
        widths = [
            min(24, max(map(len, labels.values()), default=6)),
            max((len(c["kind"]) for c in comps), default=4),
            max((len(c["name"]) for c in comps), default=4),
        ]
        # 13: 2 spaces of padding in each of 4 columns and the 5 (blank) rules of the box
        room = out.width - sum(widths) - 13
        caption = f"built-in plugins are modules of {BUILTIN_PACKAGE}"
        if room < 24:
            caption += "; descriptions: a wider terminal or --json"

        def cut(text: str) -> str:
            return text if len(text) <= room else text[: room - 1] + "…"

        table = Table(title="graphroute plugins", box=box.SIMPLE_HEAD, caption=caption)
        table.add_column("plugin", overflow="fold", max_width=widths[0])
        table.add_column("kind", no_wrap=True)
        table.add_column("name", no_wrap=True)
        if room >= 24:
            table.add_column("description", no_wrap=True)

        def add(*cells: str) -> None:
            table.add_row(*cells[: len(table.columns)])

        for r in rows:
            label = escape(labels[r["name"]])
            if r["error"]:  # its whole message follows the table, on stderr
                add(label, "[bold red]broken[/]", "-", escape(cut(r["error"])))
            for i, comp in enumerate(r["components"]):
                add(label if i == 0 else "", comp["kind"], comp["name"], escape(cut(comp["description"])))
            if not r["components"] and not r["error"]:
                add(label, "-", "-", "")
            table.add_section()
        out.print(table)
    for mod, why in skipped_builtins().items():
        err.print(f"[yellow]not loaded:[/] {escape(mod)}: {escape(str(why))}", highlight=False)
    for name in reg.disabled:
        err.print(f"[yellow]disabled:[/] {escape(name)} (GRAPHROUTE_DISABLE_PLUGINS)", highlight=False)
    if reg.broken:
        raise reg.broken_error()  # after the listing: exit 2 with each broken plugin and how to skip it


def plugin_label(row: dict[str, Any]) -> str:
    """A plugin as the table names it: built-ins by their module under graphroute.plugins,
    the others with their distribution."""
    if row["builtin"]:
        return str(row["name"]).removeprefix(f"{BUILTIN_PACKAGE}.")
    return f"{row['name']} ({row['distribution'] or 'third-party'})"


# --------------------------------------------------------------------------- routes


@routes_app.callback()
def routes_list(
    ctx: typer.Context, as_json: JsonOpt = False
) -> None:
    """List routes (shipped ones and those in $GRAPHROUTE_ROUTES)."""
    if ctx.invoked_subcommand is not None:
        return
    import yaml

    rows = []
    for name, path in list_routes().items():
        try:
            desc = str((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("description", "") or "")
        except Exception as exc:  # a broken user route still shows up, with its problem
            desc = f"(unreadable: {exc})"
        rows.append({"name": name, "description": desc.strip(), "file": str(path)})
    if as_json:
        print(json.dumps({"routes": rows}, indent=2, ensure_ascii=False))
        return
    table = Table(title="routes")
    table.add_column("name")
    table.add_column("description")
    table.add_column("file")
    for r in rows:
        table.add_row(r["name"], r["description"].splitlines()[0] if r["description"] else "", r["file"])
    out.print(table)


@routes_app.command("show")
def routes_show(
    name: Annotated[str, typer.Argument(metavar="ROUTE", help="route name or YAML path")],
    set_: SetOpt = None,
    disable: DisableOpt = None,
    enable: EnableOpt = None,
) -> None:
    """Print the fully resolved route YAML (after extends, environment and overrides)."""
    ov = overrides_from_cli(set_ or [], disable or [], enable or [])
    resolved = load_route(name, get_registry(), overrides=ov)
    print(resolved.to_yaml(), end="")


# --------------------------------------------------------------------------- query


@commands.command()
def query(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="the question")],
    route: RouteOpt = DEFAULT_ROUTE,
    store: StoreOpt = None,
    group: GroupOpt = None,
    set_: SetOpt = None,
    disable: DisableOpt = None,
    enable: EnableOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print answer, citations, evidence and trace as JSON")] = False,
) -> None:
    """Answer a question through a route."""
    ov = overrides_from_cli(set_ or [], disable or [], enable or [])
    resolved = load_route(route, get_registry(), overrides=ov)  # a bad route first: it needs no store
    if not ov.is_empty():  # e.g. --set on a stage the route has switched off
        for note in idle_overrides(load_route(route, get_registry()), resolved, ov):
            warn(note)
    gr = engine(store, group, create=False)
    require_group(gr.store, gr.group)
    if not gr.store.counts(gr.group).get("nodes"):
        raise UserError(
            f"group '{gr.group}' in store '{gr.store.location}' is empty; index documents first: "
            f"graphroute index PATH --group {gr.group}"
        )
    from graphroute.core.api.constants import MODEL_LOAD
    from graphroute.core.index.stats import unfinished_run
    from graphroute.core.query.runner import run_route

    unfinished = unfinished_run(gr.store, gr.group)
    if unfinished:
        warn(unfinished)
    result = run_route(resolved, question, gr.services())
    if as_json:
        print(json.dumps(result.to_public_json(), indent=2, ensure_ascii=False))
        return
    _print_answer(question, result)
    loaded = sum(t.duration_ms for t in result.trace if t.use == MODEL_LOAD)
    models = f" (loading models {loaded:.0f} ms)" if loaded else ""
    out.print(f"[dim]{escape(result.route)} · {result.duration_ms:.0f} ms{models} · {len(result.evidence)} evidence[/]")


def _print_answer(question: str, result: QueryResult) -> None:
    """The question, the answer and where each citation points, as `query` and `demo` show them."""
    out.print(f"[bold]Q:[/] {escape(question)}", highlight=False)
    out.print(f"[bold]A:[/] {escape(result.answer)}", highlight=False)
    for c in result.citations:
        out.print(f"  [{c.index}] {_where(c)}", highlight=False, markup=False)


def _where(citation: Any) -> str:
    """Citation location for humans: the section path (which starts with the document title)
    and, for a paged document (PDF), the page."""
    document, section_path = citation.document, citation.section_path
    if not section_path or section_path == document:
        where = document
    else:
        where = section_path if section_path.startswith(document) else f"{document} > {section_path}"
    return f"{where}, p. {citation.page}" if citation.page else where


# --------------------------------------------------------------------------- index / stats


@commands.command()
def index(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...", help="files or folders to index")],
    store: StoreOpt = None,
    group: GroupOpt = None,
    profile: Annotated[str | None, typer.Option("--profile", metavar="PROFILE", help="index profile name or YAML path")] = None,
    remove_missing: Annotated[bool, typer.Option("--remove-missing", help="remove indexed documents whose files are gone")] = False,
    sweep_thresholds: Annotated[bool, typer.Option("--sweep-thresholds", help="report RELATED_TO edges, density and cross-document ratio for 0.80..0.95")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Index documents: load, parse into the skeleton, embed, build edges and the entity graph."""
    from graphroute.core.errors import IndexProfileError, StoreUnavailableError
    from graphroute.core.index.manage import check_group_name
    from graphroute.core.index.pipeline import index_exit_code

    gr = engine(store, group)
    check_group_name(gr.store, gr.group)
    try:
        # each write is atomic, and the run is marked pending until its steps finish
        with on_interrupt("what was written so far stays indexed and can be queried; run the same "
                          "`graphroute index` again to finish"):
            report = gr.index(paths, profile=profile, remove_missing=remove_missing)
    except IndexProfileError as exc:  # a config problem, like a bad route: exit 2
        raise UserError(f"index profile error: {exc}", code=2) from None
    except StoreUnavailableError as exc:  # the server went away mid-run: as atomic, and as pending
        raise StoreUnavailableError(
            f"{exc}\nwhat was written so far stays indexed; once the store answers again, run the same "
            "`graphroute index` again to finish"
        ) from None
    data = report.to_json() if hasattr(report, "to_json") else report
    if sweep_thresholds:
        from graphroute.core.apps.bench.sweep import threshold_sweep

        data["sweep"] = threshold_sweep(gr.store, gr.group)
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        _print_index_report(data)
    _warn_index_problems(data)  # on stderr with --json too, as every warning is
    code = index_exit_code(data)
    if code:
        raise typer.Exit(code)


def _warn_index_problems(data: dict[str, Any]) -> None:
    """The files skipped or failed and the run's warnings, on stderr."""
    for f in data.get("skipped", []):
        warn(f"skipped {f['path']}: {f['reason']}")
    for f in data.get("failed", []):
        err.print(f"[bold red]failed[/] {escape(str(f['path']))}: {escape(str(f['reason']))}", highlight=False)
    for w in data.get("warnings", []):
        warn(str(w))


def _print_index_report(data: dict[str, Any]) -> None:
    out.print(
        f"[bold]indexed[/] {data.get('indexed', 0)} · unchanged {data.get('unchanged', 0)} · "
        f"removed {data.get('removed', 0)} · failed {len(data.get('failed', []))} · "
        f"skipped {len(data.get('skipped', []))} "
        f"in {data.get('seconds', 0):.1f} s",
        highlight=False,
    )
    if data.get("models"):
        loads = ", ".join(f"{name} {s:.1f} s" for name, s in data["models"].items())
        out.print(f"[dim]models loaded: {escape(loads)}[/]", highlight=False)
    for line in data.get("upgrades", []):
        out.print(f"group brought up to date: {escape(line)}", highlight=False)
    if "sweep" in data:
        table = Table(title="RELATED_TO threshold sweep")
        for col in ("threshold", "edges", "density", "cross_document_ratio", "within_budget"):
            table.add_column(col)
        for row in data["sweep"]:
            table.add_row(*(str(row[c]) for c in ("threshold", "edges", "density", "cross_document_ratio", "within_budget")))
        out.print(table)


@commands.command()
def upgrade(
    store: StoreOpt = None,
    group: GroupOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Bring a group written by an older graphroute up to what today's queries read (Neo4j:
    index its sentences' text, its entities' names and its sections' titles), without
    indexing anything; `graphroute index` does the same before every run."""
    gr = engine(store, group, create=False)
    require_group(gr.store, gr.group)
    done = gr.store.upgrade_group(gr.group)
    if as_json:
        print(json.dumps({"group": gr.group, "upgrades": done}, indent=2))
        return
    for line in done or ["nothing to do: the group is up to date"]:
        out.print(f"group {escape(gr.group)}: {escape(line)}", highlight=False)


@commands.command()
def stats(
    store: StoreOpt = None,
    group: GroupOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Node counts by label, edge counts by type, and what the index steps reported."""
    from graphroute.core.index.stats import unfinished_run

    gr = engine(store, group, create=False)
    data = gr.stats()
    unfinished = unfinished_run(gr.store, gr.group)
    if unfinished:
        warn(unfinished)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"group {data['group']} ({data['backend']})")
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, n in sorted(data["nodes"].items()):
        table.add_row(f"nodes:{label}", str(n))
    for et, n in sorted(data["edges"].items()):
        table.add_row(f"edges:{et}", str(n))
    for sp, n in sorted(data["vectors"].items()):
        table.add_row(f"vectors:{sp}", str(n))
    if data.get("ppr_push"):
        table.add_row("ppr push", str(data["ppr_push"]))
    if data.get("index"):
        table.add_section()
        for key, value in _flatten(data["index"]):
            table.add_row(f"index:{key}", value)
    out.print(table)


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Rows of a nested index report: dotted keys, scalar values (a list of scalars joined;
    an empty one, such as no failed files, reads `none` rather than a blank cell)."""
    if isinstance(data, dict):
        rows: list[tuple[str, str]] = []
        for k, v in data.items():
            rows.extend(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return rows
    if isinstance(data, list) and any(isinstance(v, dict | list) for v in data):
        return [r for i, v in enumerate(data) for r in _flatten(v, f"{prefix}[{i}]")]
    if isinstance(data, list):
        return [(prefix, ", ".join(str(v) for v in data) if data else "none")]
    return [(prefix, str(data))]


# --------------------------------------------------------------------------- demo


@commands.command()
def demo(
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", metavar="DIR", help="folder of documents (and a questions.txt) [default: the sample corpus shipped with graphroute]"),
    ] = None,
    store: StoreOpt = None,
    route: RouteOpt = DEFAULT_ROUTE,
) -> None:
    """Index the sample corpus offline and answer its sample questions (from any directory)."""
    corpus = corpus or SAMPLE_CORPUS
    if not corpus.is_dir():
        raise UserError(f"corpus folder {corpus} not found")
    gr = engine(store or os.path.join(".graphroute", "demo"), "demo")
    report = gr.index([corpus])
    data = report.to_json() if hasattr(report, "to_json") else report
    _print_index_report(data)
    qfile = corpus / "questions.txt"
    questions = [q.strip() for q in qfile.read_text(encoding="utf-8").splitlines() if q.strip()] if qfile.exists() else []
    for q in questions:
        result = gr.query(q, route=route)
        out.rule()
        _print_answer(q, result)
        out.print(f"[dim]{escape(result.route)} · {result.duration_ms:.0f} ms[/]")


