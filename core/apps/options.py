"""Command-line options shared by the commands (``graphroute.core.apps.cli``, ``bench``,
``serve``, ``perf``): one definition each, with a readable metavar and a help text."""

from __future__ import annotations

from typing import Annotated

import typer
from graphroute.core.config.settings import DEFAULT_STORE

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="DIR|URI",
        help=f"store directory, a neo4j:// or bolt:// URI, or `neo4j` for the dev server / $NEO4J_URI [env GRAPHROUTE_STORE, default {DEFAULT_STORE}]",
    ),
]
GroupOpt = Annotated[str | None, typer.Option("--group", "-g", metavar="GROUP", help="group (corpus) name [env GRAPHROUTE_GROUP]")]
RouteOpt = Annotated[str, typer.Option("--route", "-r", metavar="ROUTE", help="route name or YAML path")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", metavar="ID.PARAM=VALUE", help="override a stage parameter (repeatable)")]
DisableOpt = Annotated[list[str] | None, typer.Option("--disable", metavar="ID", help="switch a stage off by id (repeatable)")]
EnableOpt = Annotated[list[str] | None, typer.Option("--enable", metavar="ID", help="switch a stage on by id (repeatable)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of the human-readable output")]
