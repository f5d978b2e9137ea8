"""``graphroute perf``: the performance benchmark command.

Thin typer layer over :mod:`graphroute.core.apps.perf.perf`; core/cli.py calls :func:`register`.
The table (or ``--json``) goes to stdout, progress lines to stderr, and the full result is
always written to a JSON file so a run on another machine can be compared field by field.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from graphroute.core.apps.options import JsonOpt
from graphroute.core.hookspecs import hookimpl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

out = Console(width=None if sys.stdout.isatty() else 180)  # a file or pipe gets the whole row
err = Console(stderr=True)


def perf(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    out_file: Annotated[Path, typer.Option("--out", metavar="FILE", help="write the JSON result here")] = Path(".graphroute/perf.json"),
    quick: Annotated[bool, typer.Option("--quick", help="small slices of every part (CI smoke run, a few minutes)")] = False,
    passages: Annotated[int | None, typer.Option("--passages", min=1, metavar="N", help="index only the first N MuSiQue passages")] = None,
    questions: Annotated[int | None, typer.Option("--questions", min=1, metavar="N", help="questions per route")] = None,
    scale: Annotated[str | None, typer.Option("--scale", metavar="N,M", help="two synthetic corpus sizes in sentences, e.g. 25000,100000")] = None,
    no_neo4j: Annotated[bool, typer.Option("--no-neo4j", help="skip the Neo4j query suite and write throughput")] = False,
    workdir: Annotated[Path | None, typer.Option("--workdir", metavar="DIR", help="keep stores and corpora here (default: a temporary folder, removed)")] = None,
) -> None:
    """Index, query, scale and store-write figures against the models' own cost (the
    subcommands measure a group at scale: docs/pages/scaling.md)."""
    if ctx.invoked_subcommand is not None:
        return
    from dataclasses import replace

    from graphroute.core.apps.perf.perf import MUSIQUE_DIR, PerfConfig, run_perf, table_rows

    if not (MUSIQUE_DIR / "corpus.json").is_file():
        err.print(f"[bold red]error:[/] the MuSiQue corpus is not at {escape(str(MUSIQUE_DIR))}", highlight=False)
        raise typer.Exit(1)
    cfg = PerfConfig.quick_config() if quick else PerfConfig()
    if passages is not None:
        cfg = replace(cfg, passages=passages)
    if questions is not None:
        cfg = replace(cfg, questions=questions)
    if scale:
        try:
            a, b = (int(x) for x in scale.split(","))
        except ValueError:
            err.print("[bold red]error:[/] --scale takes two sizes, e.g. 25000,100000")
            raise typer.Exit(2) from None
        cfg = replace(cfg, scale_sentences=(min(a, b), max(a, b)))
    if no_neo4j:
        cfg = replace(cfg, neo4j=False)
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        import os

        err.print(f"[dim]{msg} (load {' '.join(f'{x:.1f}' for x in os.getloadavg())})[/]", highlight=False)

    out_file.parent.mkdir(parents=True, exist_ok=True)

    def save(partial: dict[str, object]) -> None:
        out_file.write_text(json.dumps(partial, indent=2), encoding="utf-8")

    result = run_perf(cfg, log=log, workdir=workdir, on_update=save)
    save(result)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"graphroute perf ({'quick' if quick else 'full'}; load at start {result['machine']['load_average']})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("note")
    for fig, val, note in table_rows(result):
        table.add_row(fig, val, note)
    out.print(table)
    err.print(f"[dim]JSON written to {escape(str(out_file))}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``graphroute perf`` (and its scale subcommands) to the CLI."""
    from graphroute.core.apps.perf import scale

    group = typer.Typer(help="Performance figures against the models' own cost, and at scale.")
    group.callback(invoke_without_command=True)(perf)
    scale.register(group)
    app.add_typer(group, name="perf")


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    register(cli)
