"""Commands that manage what is indexed: ``groups``, ``documents`` and ``delete``.

A default command plugin like :mod:`graphroute.core.apps.cli.commands`; each command is a
thin layer over :class:`~graphroute.core.engine.GraphRoute` (``groups()``, ``documents()``,
``delete()``), which the HTTP API's ``/groups`` endpoints call too.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from graphroute.core.apps.cli.main import engine, err, on_interrupt, out, warn
from graphroute.core.apps.options import JsonOpt, StoreOpt
from graphroute.core.errors import UserError
from graphroute.core.hookspecs import hookimpl
from rich.markup import escape
from rich.table import Table

commands = typer.Typer()

RequiredGroupOpt = Annotated[str, typer.Option("--group", "-g", help="group (corpus) name", metavar="GROUP")]


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    cli.registered_commands.extend(commands.registered_commands)


@commands.command()
def groups(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """List the store's groups with their document and sentence counts."""
    rows = engine(store, None, create=False).groups()
    if as_json:
        print(json.dumps({"groups": rows}, indent=2))
        return
    if not rows:
        err.print("no groups; index documents first: graphroute index PATH --group NAME", highlight=False)
        return
    table = Table(title="groups")
    table.add_column("group")
    table.add_column("documents", justify="right")
    table.add_column("sentences", justify="right")
    for r in rows:
        table.add_row(r["group"], str(r["documents"]), str(r["sentences"]))
    out.print(table)


@commands.command()
def documents(group: RequiredGroupOpt, store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """List a group's documents: id, title, path, content hash, when indexed, sentences."""
    rows = engine(store, group, create=False).documents(group)
    if as_json:
        print(json.dumps({"group": group, "documents": rows}, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"documents in group {group}")
    for col in ("id", "title", "path", "content hash", "indexed at", "sentences"):
        table.add_column(col, justify="right" if col == "sentences" else "left", overflow="fold")
    for r in rows:
        table.add_row(
            r["id"], r["title"], r["path"], (r["content_hash"] or "")[:12], r["indexed_at"] or "-", str(r["sentences"]),
            end_section=False,
        )
    out.print(table)


@commands.command()
def delete(
    group: RequiredGroupOpt,
    document: Annotated[
        str | None,
        typer.Option("--document", "-d", metavar="ID|TITLE|PATH", help="delete only this document (by id, title or file path)"),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a group, or one document of it (its derived layers are updated).

    Asks for confirmation on a terminal; elsewhere (a script, a pipe) it refuses without
    --yes and exits 2.
    """
    gr = engine(store, group, create=False)
    if document is None:
        from graphroute.core.index.manage import require_group

        require_group(gr.store, group)
        what = f"the whole group {group!r} ({gr.store.location})"
    else:
        from graphroute.core.index.manage import documents_to_delete

        docs = documents_to_delete(gr.store, group, document)
        names = ", ".join(f"{d['title'] or d['id']} ({d['id']})" for d in docs)
        what = f"{_count(len(docs), 'document')} from group {group!r}: {names}"
    # finishing an interrupted delete's index steps deletes nothing more: no confirmation
    if not yes and (document is None or docs):
        if not sys.stdin.isatty():
            raise UserError(f"refusing to delete {what} without confirmation; pass --yes")
        if not typer.confirm(f"Delete {what}?", default=False, err=True):
            err.print("nothing deleted")
            raise typer.Exit(1)
    # A store may delete a large group in several transactions (Neo4j: 5,000 nodes each), so a
    # stopped delete can leave part of the group; only running it again empties it.
    stopped = (
        f"group {group!r} may be partly deleted (what is left of it is not a whole index); "
        "run the same `graphroute delete` again to finish" if document is None else
        "the document may already be deleted, its derived layers not yet updated; run the same "
        "`graphroute delete` again to finish"
    )
    with on_interrupt(stopped):
        # the documents confirmed: resolving the name again could find one indexed since
        result = gr.delete(group, document, ids=None if document is None else [d["id"] for d in docs])
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    _print_delete(result)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _print_delete(result: dict[str, Any]) -> None:
    if result.get("deleted_group"):
        out.print(f"[bold]deleted[/] group {escape(result['group'])} ({_count(result['documents'], 'document')})",
                  highlight=False)
        return
    out.print(
        f"[bold]deleted[/] {_count(len(result['deleted']), 'document')} from group {escape(result['group'])}; "
        f"{_count(result['documents'], 'document')} and {_count(result['sentences'], 'sentence')} remain",
        highlight=False,
    )
    for w in result.get("warnings", []):
        warn(w)
