"""graphroute core: the kernel plugins are written against, and the engine applications use.

The public Python API::

    from graphroute.core import GraphRoute, Stage, StageKind, Slot, StageParams, hookimpl

Names are imported on first use (PEP 562), so ``import graphroute.core.api.stage`` - what a
plugin module does - loads the stage contract alone, not the engine, the config loader or
any plugin.
"""

from __future__ import annotations

import importlib
import os as _os
from typing import TYPE_CHECKING, Any

# Set before anything imports torch (OpenMP reads it once, when torch loads): OpenMP worker
# threads that spin while they wait make every torch call about 10x slower as soon as the
# cores are shared (a loaded server, spaCy parsing on the other core while the indexer
# embeds). OMP_WAIT_POLICY=ACTIVE in the environment restores spinning.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

_PUBLIC: dict[str, str] = {
    **dict.fromkeys(
        ["Block", "Embedder", "Extraction", "Extractor", "IndexContext", "IndexStep", "LLMClient",
         "LLMResponse", "Loader", "Segmenter", "SourceDocument", "StoreBackend"],
        "graphroute.core.api.components",
    ),
    **dict.fromkeys(
        ["Citation", "Edge", "EdgeType", "Evidence", "Label", "Node", "QueryResult", "ScoredNode",
         "Seed", "SeedArray", "StageTrace", "VectorSpace"],
        "graphroute.core.api.models",
    ),
    **dict.fromkeys(
        ["QueryState", "Services", "Slot", "Stage", "StageContext", "StageKind", "StageParams"],
        "graphroute.core.api.stage",
    ),
    "GraphStore": "graphroute.core.api.store",
    "NOT_FOUND": "graphroute.core.api.constants",
    **dict.fromkeys(
        ["GraphRouteError", "UserError", "ConfigError", "RouteConfigError", "IndexProfileError",
         "PluginError", "StoreError", "StoreUnavailableError", "LoaderError", "ModelError"],
        "graphroute.core.errors",
    ),
    "hookimpl": "graphroute.core.hookspecs",
    "Overrides": "graphroute.core.config.overrides",
    "RouteConfig": "graphroute.core.config.route",
    "load_route": "graphroute.core.config.resolve",
    "get_registry": "graphroute.core.registry",
    "GraphRoute": "graphroute.core.engine",
    "open_store": "graphroute.core.engine",
}

__all__ = [
    "NOT_FOUND",
    "Block",
    "Citation",
    "ConfigError",
    "Edge",
    "EdgeType",
    "Embedder",
    "Evidence",
    "Extraction",
    "Extractor",
    "GraphRoute",
    "GraphRouteError",
    "GraphStore",
    "IndexContext",
    "IndexProfileError",
    "IndexStep",
    "LLMClient",
    "LLMResponse",
    "Label",
    "Loader",
    "LoaderError",
    "ModelError",
    "Node",
    "Overrides",
    "PluginError",
    "QueryResult",
    "QueryState",
    "RouteConfig",
    "RouteConfigError",
    "ScoredNode",
    "Seed",
    "SeedArray",
    "Segmenter",
    "Services",
    "Slot",
    "SourceDocument",
    "Stage",
    "StageContext",
    "StageKind",
    "StageParams",
    "StageTrace",
    "StoreBackend",
    "StoreError",
    "StoreUnavailableError",
    "UserError",
    "VectorSpace",
    "__version__",
    "get_registry",
    "hookimpl",
    "load_route",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'graphroute.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from graphroute.core.api.components import (
        Block,
        Embedder,
        Extraction,
        Extractor,
        IndexContext,
        IndexStep,
        LLMClient,
        LLMResponse,
        Loader,
        Segmenter,
        SourceDocument,
        StoreBackend,
    )
    from graphroute.core.api.constants import NOT_FOUND
    from graphroute.core.api.models import (
        Citation,
        Edge,
        EdgeType,
        Evidence,
        Label,
        Node,
        QueryResult,
        ScoredNode,
        Seed,
        SeedArray,
        StageTrace,
        VectorSpace,
    )
    from graphroute.core.api.stage import (
        QueryState,
        Services,
        Slot,
        Stage,
        StageContext,
        StageKind,
        StageParams,
    )
    from graphroute.core.api.store import GraphStore
    from graphroute.core.config.overrides import Overrides
    from graphroute.core.config.resolve import load_route
    from graphroute.core.config.route import RouteConfig
    from graphroute.core.engine import GraphRoute, open_store
    from graphroute.core.errors import (
        ConfigError,
        GraphRouteError,
        IndexProfileError,
        LoaderError,
        ModelError,
        PluginError,
        RouteConfigError,
        StoreError,
        StoreUnavailableError,
        UserError,
    )
    from graphroute.core.hookspecs import hookimpl
    from graphroute.core.registry import get_registry
