"""CLI commands ``graphroute serve`` and ``graphroute new-plugin`` (registered by core/cli.py).

``serve`` refuses to listen on a non-loopback address without a bearer token: an index and
its answers are private data, and an open port on a shared network should never expose them
by accident. The token comes from ``GRAPHROUTE_TOKEN`` (preferred: it stays out of the
process list) or ``--token``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

import typer
from graphroute.core.api.constants import DEFAULT_ROUTE
from graphroute.core.apps.options import StoreOpt
from graphroute.core.apps.serve.server import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_QUERY_THREADS,
    DEFAULT_QUEUED_PER_THREAD,
    DEFAULT_TIMEOUT_S,
)
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.net import is_loopback


def check_bind(host: str, token: str | None) -> None:
    """Raise the CLI's UserError (exit 2) when binding publicly without a token."""
    from graphroute.core.errors import UserError

    if not token and not is_loopback(host):
        raise UserError(
            f"refusing to listen on {host} without a token: anyone who can reach this address could "
            "query and index your data. Set GRAPHROUTE_TOKEN (or pass --token) and clients send "
            "`Authorization: Bearer <token>`; or bind to 127.0.0.1.",
            code=2,
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 picks a free port), as uvicorn binds it."""
    from graphroute.core.errors import UserError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def require_server_extra() -> None:
    """Raise the CLI's UserError (exit 2) naming the extra to install when the HTTP server's
    packages are missing (an install with other extras only), instead of the ImportError an
    internal error would show."""
    from importlib import import_module

    from graphroute.core.errors import UserError

    missing = []
    for name in ("fastapi", "uvicorn"):
        try:
            import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise UserError(
            f"graphroute serve needs the `server` extra ({' and '.join(missing)} not installed): "
            "pip install 'graphroute[server]'",
            code=2,
        )


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``new-plugin`` to the ``graphroute`` app."""

    @app.command()
    def serve(
        store: StoreOpt = None,
        group: Annotated[str | None, typer.Option("--group", "-g", metavar="GROUP", help="default group [env GRAPHROUTE_GROUP]")] = None,
        host: Annotated[str, typer.Option("--host", metavar="ADDRESS", help="address to bind; non-loopback requires a token")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", min=0, max=65535, metavar="PORT", help="port to listen on (0: any free port)")] = 8000,
        token: Annotated[str | None, typer.Option("--token", metavar="TOKEN", help="bearer token [env GRAPHROUTE_TOKEN, preferred]")] = None,
        max_body: Annotated[int, typer.Option("--max-body", min=1, metavar="BYTES", help="request body limit in bytes (413 above)")] = DEFAULT_MAX_BODY_BYTES,
        timeout: Annotated[float, typer.Option("--timeout", min=0.1, metavar="SECONDS", help="per-request time limit in seconds (504 above)")] = DEFAULT_TIMEOUT_S,
        workers: Annotated[int, typer.Option("--query-threads", min=1, metavar="N", help="threads answering queries")] = DEFAULT_QUERY_THREADS,
        max_queued: Annotated[int | None, typer.Option(
            "--max-queued", min=0, metavar="N", envvar="GRAPHROUTE_MAX_QUEUED", show_envvar=False,
            help=f"queries that may wait for a thread; more get 503 with Retry-After "
            f"[env GRAPHROUTE_MAX_QUEUED, default {DEFAULT_QUEUED_PER_THREAD} x --query-threads]",
        )] = None,
        index_root: Annotated[list[Path] | None, typer.Option("--index-root", metavar="DIR", help="allow POST /index `paths` under this folder (repeatable)")] = None,
        default_route: Annotated[str, typer.Option("--route", "-r", metavar="ROUTE", help="route used when a query names none")] = DEFAULT_ROUTE,
        preload: Annotated[bool, typer.Option("--preload/--no-preload", help="run the default route once at startup to load its models")] = True,
    ) -> None:
        """Serve the HTTP API (POST /query, /index; GET /routes, /plugins, /jobs/ID, /health)."""
        require_server_extra()
        import uvicorn
        from graphroute.core.apps.serve.playground import mount_playground
        from graphroute.core.apps.serve.server import (
            LOGGER_NAME,
            ServerConfig,
            configure_logging,
            create_app,
            log_event,
            secrets_of,
        )
        from graphroute.core.config.settings import Settings
        from graphroute.core.errors import UserError

        token = token or os.environ.get("GRAPHROUTE_TOKEN") or None
        check_bind(host, token)
        # stderr carries JSON log lines only: no progress bars (jobs report progress instead)
        os.environ["GRAPHROUTE_PROGRESS"] = "0"
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")
        for root in index_root or []:
            if not root.is_dir():
                raise UserError(f"--index-root {root} is not a folder", code=2)
        config = ServerConfig(
            store=store, group=group, token=token, max_body_bytes=max_body, request_timeout_s=timeout,
            query_workers=workers, max_queued=max_queued, index_roots=list(index_root or []),
            default_route=default_route, preload=preload,
        )
        settings = Settings()
        configure_logging(lambda: secrets_of(config, settings))
        app_ = create_app(config)
        mount_playground(app_)  # the page at `/`, behind the same token
        import logging

        gr = app_.state.engine
        log_event(
            logging.getLogger(LOGGER_NAME), logging.INFO, "serving",
            host=host, port=port, backend=gr.store.backend, group=gr.group, auth=bool(token),
            max_body_bytes=max_body, timeout_s=timeout, query_threads=workers, max_queued=config.queue_bound(),
            index_roots=[str(r) for r in config.index_roots],
        )
        # The socket is bound here so the line below names the real port (also for --port 0).
        sock = bind_socket(host, port)
        url = f"http://{f'[{host}]' if ':' in host else host}:{sock.getsockname()[1]}/"
        print(f"graphroute serving group {gr.group} at {url} (API docs at {url}docs; Ctrl+C stops)", flush=True)
        server = uvicorn.Server(uvicorn.Config(app_, log_config=None, access_log=False, timeout_graceful_shutdown=5))
        server.run(sockets=[sock])

    @app.command("new-plugin")
    def new_plugin_cmd(
        name: Annotated[str, typer.Argument(metavar="NAME", help="plugin name, e.g. keyword-boost")],
        directory: Annotated[Path, typer.Option("--dir", metavar="DIR", help="parent folder of the new package")] = Path("."),
    ) -> None:
        """Write a ready plugin package (entry point, one stage, its test, README)."""
        from graphroute.core.apps.cli.main import out
        from graphroute.core.apps.scaffold import new_plugin
        from graphroute.core.errors import ScaffoldError, UserError
        from rich.markup import escape

        try:
            target, names, written = new_plugin(name, directory)
        except ScaffoldError as exc:
            raise UserError(str(exc), code=2) from None
        out.print(f"[bold]created[/] {escape(str(target))}", highlight=False)
        for p in written:
            out.print(f"  {p.relative_to(target)}", highlight=False, markup=False)
        out.print(
            f"next: pip install -e {target} && graphroute plugins   "
            f"(then `use: {names.ident}` in a route)",
            highlight=False, markup=False,
        )


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    register(cli)
