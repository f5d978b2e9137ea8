"""The ``graphroute`` command line: the app and the entry point (shared options: ``graphroute.core.apps.options``).

Commands are plugins (:data:`DEFAULT_COMMANDS`, then the ``graphroute.commands`` entry
points), each a thin layer over :class:`~graphroute.core.engine.GraphRoute`. Errors leave
with the exit code :func:`graphroute.core.errors.exit_code_for` gives them - 2 for a user
error, whose message names the file, line, stage and fix - never a traceback (set
``GRAPHROUTE_DEBUG=1`` to see one anyway).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from graphroute.core.api.values import env_flag
from graphroute.core.config.settings import Settings
from graphroute.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_USER,
    GraphRouteError,
    IndexCancelled,
    PluginError,
    RouteConfigError,
    exit_code_for,
    message_for,
)
from rich.console import Console
from rich.markup import escape

app = typer.Typer(
    name="graphroute",
    help="Plugin-based retrieval: index documents, then answer questions through declarative routes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # click's plain help: `[env X, default Y]` in option help is text, not rich markup, and
    # flags show no `<bool>` metavar
    rich_markup_mode=None,
    # typer's --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    add_completion=True,
)

out = Console()
err = Console(stderr=True)

def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """A warning on stderr: something the user should know about a command that went on."""
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def settings_for(store: str | None, group: str | None) -> Settings:
    s = Settings()
    if store:
        s.store = store
    if s.store == "neo4j":  # shorthand: the server NEO4J_URI names, else the dev server (`make neo4j-up`)
        s.store = os.environ.get("NEO4J_URI") or f"bolt://127.0.0.1:{os.environ.get('NEO4J_PORT') or 7687}"
    if group:
        s.group = group
    return s


def _print_version(value: bool) -> None:
    if value:
        from graphroute.core import __version__

        print(f"graphroute {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool, typer.Option("--version", help="print the version and exit", is_eager=True, callback=_print_version)
    ] = False,
    neo4j_user: Annotated[str | None, typer.Option("--neo4j-user", metavar="USER", help="Neo4j user [env NEO4J_USER, default neo4j]")] = None,
    neo4j_password: Annotated[
        str | None, typer.Option("--neo4j-password", metavar="PASSWORD", help="Neo4j password [env NEO4J_PASSWORD; a loopback server defaults to the dev server's]", show_default=False)
    ] = None,
) -> None:
    """Options that apply to every command (put them before the command name)."""
    # Settings read credentials from the environment; flags take precedence over it.
    if neo4j_user:
        os.environ["NEO4J_USER"] = neo4j_user
    if neo4j_password:
        os.environ["NEO4J_PASSWORD"] = neo4j_password


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl+C, or an error raised while Ctrl+C unwound a library call (the
    Neo4j driver, stopped inside a read, can raise a BufferError whose context is the
    KeyboardInterrupt)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


@contextmanager
def on_interrupt(message: str) -> Iterator[None]:
    """Ctrl+C inside the block ends the command with :class:`IndexCancelled` (``message``:
    what was kept and how to finish), however the interrupted call unwinds."""
    try:
        yield
    except KeyboardInterrupt:
        raise IndexCancelled(message) from None
    except Exception as exc:
        if interrupted(exc):
            raise IndexCancelled(message) from None
        raise


def engine(store: str | None, group: str | None, *, create: bool = True) -> Any:
    """The engine a command runs on. A command that only reads passes ``create=False``: a
    store location holding no store is then an error (exit 2), so a mistyped ``--store``
    creates nothing."""
    from graphroute.core.engine import GraphRoute

    return GraphRoute(settings=settings_for(store, group), create=create)


# --------------------------------------------------------------------------- entry point

# The CLI's own command plugins, loaded by name like pytest's default plugins. A package adds
# commands the same way: a module with a ``register_commands`` hook, announced under the
# ``graphroute.commands`` entry-point group (a group of its own, so starting the CLI imports
# command modules only, never stage or model plugins).
DEFAULT_COMMANDS: tuple[str, ...] = (
    "graphroute.core.apps.cli.commands",
    "graphroute.core.apps.cli.manage",
    "graphroute.core.apps.bench.commands",
    "graphroute.core.apps.serve.commands",
    "graphroute.core.apps.perf.commands",
)
COMMANDS_ENTRY_POINTS = "graphroute.commands"

_registered = False


def cli_app() -> typer.Typer:
    """The CLI with every command registered (built-in and third-party command plugins)."""
    global _registered
    if not _registered:
        _registered = True
        import importlib

        import pluggy
        from graphroute.core import hookspecs

        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        for name in reversed(DEFAULT_COMMANDS):  # pluggy calls the last registered first
            pm.register(importlib.import_module(name), name=name)
        if not env_flag("GRAPHROUTE_DISABLE_ENTRY_POINTS"):
            from graphroute.core.registry import disabled_plugins, load_entry_points

            # a broken command plugin is reported by name, with how to skip it, not a traceback
            broken = load_entry_points(pm, COMMANDS_ENTRY_POINTS, disabled_plugins(), {})
            if broken:
                raise PluginError("\n".join(b.message() for b in broken))
        pm.hook.register_commands(cli=app)
    return app


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error leaves through :func:`exit_code_for`."""
    try:
        debug = env_flag("GRAPHROUTE_DEBUG")
    except GraphRouteError as exc:
        err.print(f"[bold red]error:[/] {escape(message_for(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exit_code_for(exc))
    try:
        # standalone_mode=False makes click *return* the code of a `typer.Exit(n)` raised in
        # a command instead of raising it: pass it on, or every failure would exit 0
        rv = cli_app()(args=argv, standalone_mode=False)
        if rv == EXIT_INTERRUPTED:  # typer turns Ctrl+C in a command into this code, silently
            err.print("interrupted")
        if isinstance(rv, int) and not isinstance(rv, bool) and rv != 0:
            sys.exit(rv)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except GraphRouteError as exc:
        if debug:
            raise
        text = message_for(exc)
        labels = {RouteConfigError: "route config error", PluginError: "plugin error", IndexCancelled: "interrupted"}
        label = labels.get(type(exc), "error")
        err.print(f"[bold red]{label}:[/] ", end="", highlight=False, markup=True)
        err.print(text, highlight=False, markup=False, soft_wrap=True)
        sys.exit(exit_code_for(exc))
    except Exception as exc:  # click usage errors and the unexpected
        import click

        # typer 0.29 raises its own copy of click's exceptions (under TyperException), not click's
        usage = (click.exceptions.ClickException, getattr(typer, "TyperException", click.exceptions.ClickException))
        if isinstance(exc, usage) and hasattr(exc, "show"):
            exc.show()
            sys.exit(int(getattr(exc, "exit_code", EXIT_USER)))
        if isinstance(exc, click.exceptions.Abort | typer.Abort):
            sys.exit(1)
        if interrupted(exc) and not debug:
            err.print("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        if debug:
            raise
        err.print(f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))}", highlight=False, soft_wrap=True)
        err.print("[dim]set GRAPHROUTE_DEBUG=1 for a traceback[/]")
        sys.exit(exit_code_for(exc))


if __name__ == "__main__":
    main()
