"""graphroute core: models, hook specs, registry, route config, runner, store protocol.

The public Python API::

    from graphroute.core import GraphRoute, Stage, StageKind, Slot, StageParams, hookimpl
"""

import os as _os

# Set before anything imports torch (OpenMP reads it once, when torch loads): OpenMP worker
# threads that spin while they wait make every torch call about 10x slower as soon as the
# cores are shared - a loaded server, or spaCy parsing on the other core while the indexer
# embeds (`graphroute perf`: one query embedding 550-710 ms spinning vs 40-57 ms passive on
# this 2-core machine under load). OMP_WAIT_POLICY=ACTIVE in the environment restores spinning.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .components import (
    Block,
    Embedder,
    Extraction,
    Extractor,
    IndexStep,
    LLMClient,
    LLMResponse,
    Loader,
    LoaderError,
    Segmenter,
    SourceDocument,
    StoreBackend,
)
from .config import Overrides, RouteConfig, RouteConfigError, load_route
from .engine import GraphRoute, open_store
from .hookspecs import hookimpl
from .models import (
    Citation,
    Edge,
    EdgeType,
    Evidence,
    Label,
    Node,
    QueryResult,
    ScoredNode,
    Seed,
    StageTrace,
    VectorSpace,
)
from .registry import PluginError, get_registry
from .stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from .store import GraphStore, StoreError

__version__ = "0.1.0"

__all__ = [
    "Block",
    "Citation",
    "Edge",
    "EdgeType",
    "Embedder",
    "Evidence",
    "Extraction",
    "Extractor",
    "GraphRoute",
    "GraphStore",
    "IndexStep",
    "LLMClient",
    "LLMResponse",
    "Label",
    "Loader",
    "LoaderError",
    "Node",
    "Overrides",
    "PluginError",
    "QueryResult",
    "QueryState",
    "RouteConfig",
    "RouteConfigError",
    "ScoredNode",
    "Seed",
    "Segmenter",
    "Slot",
    "SourceDocument",
    "Stage",
    "StageContext",
    "StageKind",
    "StageParams",
    "StageTrace",
    "StoreBackend",
    "StoreError",
    "VectorSpace",
    "__version__",
    "get_registry",
    "hookimpl",
    "load_route",
    "open_store",
]
