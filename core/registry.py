"""The plugin manager and the registry of everything plugins contribute.

Built-in plugins are registered first, as default plugins, exactly the way a third party is
(they only live in this distribution); then every ``graphroute`` entry point is loaded.
Each ``register_*`` hook's results are collected into a :class:`Family` keyed by name.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy
from graphroute.core import hookspecs
from graphroute.core.api.components import (
    Embedder,
    Extractor,
    IndexStep,
    LLMClient,
    Loader,
    Segmenter,
    StoreBackend,
)
from graphroute.core.api.stage import Stage, StageKind
from graphroute.core.api.values import env_flag
from graphroute.core.errors import PluginError

T = TypeVar("T")

BUILTIN_PACKAGE = "graphroute.plugins"
# Built-in plugin modules, imported by name like pytest's default plugins, so the kernel never
# imports a plugin module statically.
DEFAULT_PLUGINS: tuple[str, ...] = (
    # index side
    "graphroute.plugins.loaders.files",
    "graphroute.plugins.loaders.pdf",
    "graphroute.plugins.loaders.word",
    "graphroute.plugins.loaders.sheets",
    "graphroute.plugins.loaders.azure_di",
    "graphroute.plugins.segmenters.spacy_segmenter",
    "graphroute.plugins.embedders.local",
    "graphroute.plugins.embedders.st_torch",
    "graphroute.plugins.embedders.remote",
    "graphroute.plugins.index_steps.skeleton",
    "graphroute.plugins.extractors.builtin",
    "graphroute.plugins.graph_builders.entity_graph",
    "graphroute.plugins.stores.embedded",
    "graphroute.plugins.stores.neo4j_store",
    "graphroute.plugins.llm.openai_chat",
    # query side
    "graphroute.plugins.seeds.entity_seeds",
    "graphroute.plugins.seeds.tiers",
    "graphroute.plugins.seeds.blocklist",
    "graphroute.plugins.expanders.graph",
    "graphroute.plugins.expanders.vector",
    "graphroute.plugins.denoisers.route2",
    "graphroute.plugins.denoisers.skeleton",
    "graphroute.plugins.denoisers.context",
    "graphroute.plugins.denoisers.rerank_remote",
    "graphroute.plugins.denoisers.grounding",
    "graphroute.plugins.synthesizers.builtin",
    "graphroute.plugins.baselines.lexical",
)


@dataclass
class Entry(Generic[T]):
    name: str
    cls: type[T]
    plugin: str  # the plugin (module or entry point) that registered it


@dataclass
class Family(Generic[T]):
    """All registered classes of one family, keyed by their ``name``."""

    title: str
    entries: dict[str, Entry[T]] = field(default_factory=dict)

    def add(self, cls: type[T], plugin: str) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {plugin!r} registered {cls!r} without a `name`")
        if name in self.entries:
            other = self.entries[name].plugin
            raise PluginError(
                f"duplicate {self.title} name {name!r}: registered by plugin {other!r} "
                f"and by plugin {plugin!r}; rename one of them"
            )
        self.entries[name] = Entry(name, cls, plugin)

    def get(self, name: str) -> type[T]:
        try:
            return self.entries[name].cls
        except KeyError:
            known = ", ".join(sorted(self.entries)) or "none"
            raise PluginError(f"unknown {self.title} {name!r}; registered: {known}") from None

    def names(self) -> list[str]:
        return sorted(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries


STAGE_HOOKS: dict[StageKind, str] = {
    StageKind.SEED_SOURCE: "register_seed_sources",
    StageKind.EXPANDER: "register_expanders",
    StageKind.DENOISER: "register_denoisers",
    StageKind.SYNTHESIZER: "register_synthesizers",
}


@dataclass
class Registry:
    """Everything the installed plugins contribute."""

    pm: pluggy.PluginManager
    stages: Family[Stage] = field(default_factory=lambda: Family("stage"))
    loaders: Family[Loader] = field(default_factory=lambda: Family("loader"))
    segmenters: Family[Segmenter] = field(default_factory=lambda: Family("segmenter"))
    embedders: Family[Embedder] = field(default_factory=lambda: Family("embedder"))
    extractors: Family[Extractor] = field(default_factory=lambda: Family("extractor"))
    index_steps: Family[IndexStep] = field(default_factory=lambda: Family("index step"))
    llm_clients: Family[LLMClient] = field(default_factory=lambda: Family("LLM client"))
    stores: Family[StoreBackend] = field(default_factory=lambda: Family("store backend"))

    def plugin_name(self, plugin: object) -> str:
        return self.pm.get_name(plugin) or repr(plugin)

    def stages_of_kind(self, kind: StageKind) -> list[Entry[Stage]]:
        return [e for e in self.stages.entries.values() if e.cls.kind == kind]

    def plugins(self) -> list[dict[str, Any]]:
        """Installed plugins and what each contributes (``graphroute plugins``)."""
        rows: dict[str, dict[str, Any]] = {}
        dists = {self.plugin_name(p): d for p, d in self.pm.list_plugin_distinfo()}
        for plugin in self.pm.get_plugins():
            name = self.plugin_name(plugin)
            dist = dists.get(name)
            rows[name] = {
                "name": name,
                "builtin": name.startswith(BUILTIN_PACKAGE),
                "distribution": f"{dist.project_name} {dist.version}" if dist else None,
                "contributes": {},
            }
        for fam in self._families():
            for e in fam.entries.values():
                key = e.cls.kind.value if fam is self.stages else fam.title  # type: ignore[attr-defined]
                rows.setdefault(e.plugin, {"name": e.plugin, "builtin": False, "distribution": None, "contributes": {}})
                rows[e.plugin]["contributes"].setdefault(key, []).append(e.name)
        for r in rows.values():
            for v in r["contributes"].values():
                v.sort()
        return sorted(rows.values(), key=lambda r: (not r["builtin"], r["name"]))

    def _families(self) -> list[Family[Any]]:
        return [
            self.stages,
            self.loaders,
            self.segmenters,
            self.embedders,
            self.extractors,
            self.index_steps,
            self.llm_clients,
            self.stores,
        ]


def build_registry(*, entry_points: bool = True, extra_plugins: list[object] | None = None) -> Registry:
    """Create a plugin manager, register built-ins, entry points and ``extra_plugins``
    (tests use that), and collect every family."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for modname in DEFAULT_PLUGINS:
        try:
            module = importlib.import_module(modname)
        except ImportError as exc:  # an optional dependency missing must not break the CLI
            if env_flag("GRAPHROUTE_STRICT_PLUGINS"):
                raise
            _skipped_builtins[modname] = str(exc)
            continue
        pm.register(module, name=modname)
    if entry_points and not env_flag("GRAPHROUTE_DISABLE_ENTRY_POINTS"):
        try:
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
        except Exception as exc:  # a broken third-party plugin is reported, by name
            raise PluginError(f"failed to load a `graphroute` entry-point plugin: {exc}") from exc
    # Local plugin modules without packaging (like datasette's --plugins-dir):
    # GRAPHROUTE_PLUGINS=my_pkg.my_plugin,other.module
    for modname in filter(None, (m.strip() for m in os.environ.get("GRAPHROUTE_PLUGINS", "").split(","))):
        try:
            pm.register(importlib.import_module(modname), name=modname)
        except ImportError as exc:
            raise PluginError(f"GRAPHROUTE_PLUGINS names {modname!r}, which cannot be imported: {exc}") from exc
    for extra in extra_plugins or []:
        pm.register(extra)
    reg = Registry(pm=pm)
    _collect(reg)
    return reg


_skipped_builtins: dict[str, str] = {}


def skipped_builtins() -> dict[str, str]:
    """Built-in plugin modules not loaded because an optional dependency is missing."""
    return dict(_skipped_builtins)


def _collect(reg: Registry) -> None:
    pm = reg.pm
    for kind, hook in STAGE_HOOKS.items():
        for impl in getattr(pm.hook, hook).get_hookimpls():
            for cls in impl.function() or []:
                if getattr(cls, "kind", None) != kind:
                    raise PluginError(
                        f"plugin {impl.plugin_name!r} returned {cls.__name__} from {hook} "
                        f"but its kind is {getattr(cls, 'kind', None)!r}, expected {kind.value!r}"
                    )
                reg.stages.add(cls, impl.plugin_name)
    simple: list[tuple[str, Family[Any]]] = [
        ("register_loaders", reg.loaders),
        ("register_segmenters", reg.segmenters),
        ("register_embedders", reg.embedders),
        ("register_extractors", reg.extractors),
        ("register_index_steps", reg.index_steps),
        ("register_llm_clients", reg.llm_clients),
        ("register_stores", reg.stores),
    ]
    for hook, fam in simple:
        for impl in getattr(pm.hook, hook).get_hookimpls():
            for cls in impl.function() or []:
                fam.add(cls, impl.plugin_name)


_registry: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    global _registry
    if _registry is None:
        _registry = build_registry()
    return _registry


def reset_registry() -> None:
    """Forget the cached registry (after installing a plugin in the same process)."""
    global _registry
    _registry = None
