"""The plugin manager and the registry of everything plugins contribute.

Built-in plugins are registered first, as default plugins, exactly the way a third party is
(they only live in this distribution); then every ``graphroute`` entry point is loaded.
Each ``register_*`` hook's results are collected into a :class:`Family` keyed by name.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import os
import reprlib
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy
from graphroute.core import hookspecs
from graphroute.core.api.components import (
    ComponentParams,
    Embedder,
    Extractor,
    IndexStep,
    LLMClient,
    Loader,
    Segmenter,
    StoreBackend,
)
from graphroute.core.api.stage import Slot, Stage, StageKind, StageParams
from graphroute.core.api.values import env_flag
from graphroute.core.errors import PluginError
from pydantic import BaseModel, ValidationError

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

    def clash(self, cls: type) -> str | None:
        """Why ``cls`` cannot join this family (no ``name``, or a name another plugin has
        registered), or None."""
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            return f"registers {cls.__name__} without a `name`"
        if name in self.entries:
            return (f"registers {self.title} {name!r}, which plugin {self.entries[name].plugin!r} already "
                    f"registers; give {cls.__name__} another name")
        return None

    def add(self, cls: type[T], plugin: str) -> None:
        if (why := self.clash(cls)) is not None:
            raise PluginError(f"plugin {plugin!r} {why}")
        self.entries[cls.name] = Entry(cls.name, cls, plugin)  # type: ignore[attr-defined]

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


@dataclass(frozen=True)
class PluginOrigin:
    """Where a plugin comes from, and how a user gets going when it is broken."""

    where: str
    fix: str
    distribution: str | None = None  # "name version" of an installed distribution

    @classmethod
    def entry_point(cls, name: str, value: str, group: str, dist_name: str, version: str) -> PluginOrigin:
        return cls(
            where=f"entry point `{name} = {value}` in group `{group}` of {dist_name} {version}",
            fix=(f"fix or uninstall it (pip uninstall {dist_name}), or skip it with GRAPHROUTE_DISABLE_PLUGINS={name} "
                 "(GRAPHROUTE_DISABLE_ENTRY_POINTS=1 skips every installed plugin)"),
            distribution=f"{dist_name} {version}",
        )


BUILTIN_ORIGIN = PluginOrigin("built-in", "a built-in plugin is broken: please report this graphroute bug")
ENV_ORIGIN = PluginOrigin(
    "a GRAPHROUTE_PLUGINS module",
    "fix it, or remove it from GRAPHROUTE_PLUGINS (or list it in GRAPHROUTE_DISABLE_PLUGINS)",
)
CALLER_ORIGIN = PluginOrigin("registered by the caller of build_registry", "fix it, or do not register it")


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed and contributes nothing: what failed, and how to get going."""

    name: str
    origin: PluginOrigin
    error: str
    cause: BaseException | None = field(default=None, compare=False, repr=False)  # for GRAPHROUTE_DEBUG's traceback

    def message(self) -> str:
        return f"plugin {self.name!r} ({self.origin.where}) {self.error}; {self.origin.fix}"


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
    # plugin name -> where it comes from (plugins absent here are built-ins or the caller's)
    origins: dict[str, PluginOrigin] = field(default_factory=dict)
    broken: list[BrokenPlugin] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)  # GRAPHROUTE_DISABLE_PLUGINS

    def plugin_name(self, plugin: object) -> str:
        return self.pm.get_name(plugin) or repr(plugin)

    def origin(self, name: str) -> PluginOrigin:
        if name in self.origins:
            return self.origins[name]
        return BUILTIN_ORIGIN if name.startswith(BUILTIN_PACKAGE) else CALLER_ORIGIN

    def mark_broken(self, name: str, error: str, cause: BaseException | None = None) -> None:
        """Record plugin ``name`` as broken and unregister it: it contributes nothing."""
        self.broken.append(BrokenPlugin(name, self.origin(name), error, cause))
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)

    def broken_names(self) -> set[str]:
        return {b.name for b in self.broken}

    def broken_error(self) -> PluginError:
        if len(self.broken) == 1:
            error = PluginError(self.broken[0].message())
        else:
            lines = "\n".join(f"- {b.message()}" for b in self.broken)
            error = PluginError(f"{len(self.broken)} plugins are broken:\n{lines}")
        error.__cause__ = self.broken[0].cause
        return error

    def stages_of_kind(self, kind: StageKind) -> list[Entry[Stage]]:
        return [e for e in self.stages.entries.values() if e.cls.kind == kind]

    def plugins(self) -> list[dict[str, Any]]:
        """Installed plugins, what each contributes and, for a broken one, its ``error`` and
        ``fix`` (``graphroute plugins``). ``components`` holds each contribution's kind, name, first
        docstring line and parameters (a JSON schema ``properties`` object)."""
        rows: dict[str, dict[str, Any]] = {}

        def row(name: str) -> dict[str, Any]:
            if name not in rows:
                rows[name] = {
                    "name": name,
                    "builtin": name.startswith(BUILTIN_PACKAGE),
                    "distribution": self.origin(name).distribution,
                    "contributes": {},
                    "components": [],
                    "error": None,  # what failed, for a broken plugin
                    "fix": None,  # and how to go on without it
                }
            return rows[name]

        for plugin in self.pm.get_plugins():
            row(self.plugin_name(plugin))
        for fam in self._families():
            for e in fam.entries.values():
                key = e.cls.kind.value if fam is self.stages else fam.title  # type: ignore[attr-defined]
                r = row(e.plugin)
                r["contributes"].setdefault(key, []).append(e.name)
                r["components"].append(
                    {"kind": key, "name": e.name, "description": e.cls.describe(), "params": params_schema(e.cls)}  # type: ignore[attr-defined]
                )
        for b in self.broken:
            row(b.name).update(error=b.error, fix=b.origin.fix)
        for r in rows.values():
            for v in r["contributes"].values():
                v.sort()
            r["components"].sort(key=lambda c: (c["kind"], c["name"]))
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


def params_schema(cls: type) -> dict[str, Any]:
    """The JSON schema ``properties`` of ``cls.Params``: each parameter's type, default,
    constraints and description (empty when the model has no JSON schema)."""
    try:
        properties = cls.Params.model_json_schema().get("properties", {})  # type: ignore[attr-defined]
    except Exception:  # a parameter type without a JSON schema (a callable, say)
        return {}
    # pydantic's "title" is the field name again, title-cased
    return {name: {k: v for k, v in prop.items() if k != "title"} for name, prop in properties.items()}


def build_registry(
    *, entry_points: bool = True, extra_plugins: list[object] | None = None, keep_broken: bool = False
) -> Registry:
    """Create a plugin manager, register built-ins, entry points and ``extra_plugins``
    (tests use that), and collect every family.

    A plugin that fails (its import, an unknown hook name, a ``register_*`` hook returning
    something other than a list of classes of its family) contributes nothing and is recorded
    in :attr:`Registry.broken`; unless ``keep_broken`` (``graphroute plugins``, which shows
    it), that raises a :class:`PluginError` naming each broken plugin and how to skip it."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    reg = Registry(pm=pm, disabled=disabled_plugins())
    for modname in DEFAULT_PLUGINS:
        try:
            module = importlib.import_module(modname)
        except ImportError as exc:  # an optional dependency missing must not break the CLI
            if env_flag("GRAPHROUTE_STRICT_PLUGINS"):
                raise
            _skipped_builtins[modname] = str(exc)
            continue
        _register(reg, module, modname)
    if entry_points and not env_flag("GRAPHROUTE_DISABLE_ENTRY_POINTS"):
        reg.broken.extend(load_entry_points(pm, hookspecs.PROJECT, reg.disabled, reg.origins))
    # Local plugin modules without packaging (like datasette's --plugins-dir):
    # GRAPHROUTE_PLUGINS=my_pkg.my_plugin,other.module
    for modname in filter(None, (m.strip() for m in os.environ.get("GRAPHROUTE_PLUGINS", "").split(","))):
        if modname in reg.disabled:
            continue
        reg.origins[modname] = ENV_ORIGIN
        try:
            module = importlib.import_module(modname)
        except Exception as exc:
            reg.broken.append(BrokenPlugin(modname, ENV_ORIGIN, f"cannot be imported: {_exc_text(exc)}", exc))
            continue
        _register(reg, module, modname)
    for extra in extra_plugins or []:
        _register(reg, extra, pm.get_canonical_name(extra))
    for plugin in list(pm.get_plugins()):
        _check_hook_names(reg, plugin)
    _collect(reg)
    if reg.broken and not keep_broken:
        raise reg.broken_error()
    return reg


_skipped_builtins: dict[str, str] = {}


def skipped_builtins() -> dict[str, str]:
    """Built-in plugin modules not loaded because an optional dependency is missing."""
    return dict(_skipped_builtins)


def disabled_plugins() -> list[str]:
    """Plugin names listed in ``GRAPHROUTE_DISABLE_PLUGINS`` (comma-separated): entry points
    and ``GRAPHROUTE_PLUGINS`` modules not to load, so one broken plugin can be skipped while
    the others still load. Built-in plugins are not affected."""
    return [n for n in (m.strip() for m in os.environ.get("GRAPHROUTE_DISABLE_PLUGINS", "").split(",")) if n]


def load_entry_points(
    pm: pluggy.PluginManager, group: str, disabled: list[str], origins: dict[str, PluginOrigin]
) -> list[BrokenPlugin]:
    """Register every entry point of ``group`` (as ``PluginManager.load_setuptools_entrypoints``
    does) except those named in ``disabled``; record where each comes from in ``origins`` and
    return those that failed to load, instead of stopping at the first."""
    broken: list[BrokenPlugin] = []
    for dist in list(importlib.metadata.distributions()):
        for ep in dist.entry_points:
            if ep.group != group or ep.name in disabled or pm.has_plugin(ep.name) or pm.is_blocked(ep.name):
                continue
            origins[ep.name] = origin = PluginOrigin.entry_point(
                ep.name, ep.value, group, dist.metadata["Name"], dist.version
            )
            try:
                plugin = ep.load()
            except Exception as exc:  # whatever its import raises, the plugin is broken, not the CLI
                broken.append(BrokenPlugin(ep.name, origin, f"failed to load: {_exc_text(exc)}", exc))
                continue
            if (refused := _try_register(pm, plugin, ep.name, origin)) is not None:
                broken.append(refused)
    return broken


def _try_register(pm: pluggy.PluginManager, plugin: object, name: str, origin: PluginOrigin) -> BrokenPlugin | None:
    """Register ``plugin``; None, or the BrokenPlugin when pluggy refuses it (a hook
    implementation whose arguments its spec does not have, say)."""
    if pm.get_name(plugin) is not None:  # the same module, already loaded (an entry point and GRAPHROUTE_PLUGINS)
        return None
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as exc:  # ValueError: its name is taken
        return BrokenPlugin(name, origin, f"is not a valid plugin: {_exc_text(exc)}", exc)
    return None


def _register(reg: Registry, plugin: object, name: str) -> None:
    """Register ``plugin`` in ``reg``; one pluggy refuses is recorded as broken."""
    if (refused := _try_register(reg.pm, plugin, name, reg.origin(name))) is not None:
        reg.broken.append(refused)


def _exc_text(exc: BaseException) -> str:
    """The exception on one line (pluggy's validation messages span several)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _check_hook_names(reg: Registry, plugin: object) -> None:
    """A hook implementation whose name matches no hook spec would never be called: the plugin
    is broken (pluggy's ``check_pending`` rule, applied per plugin, with a did-you-mean)."""
    specs = [n for n in dir(reg.pm.hook) if not n.startswith("_") and getattr(reg.pm.hook, n).has_spec()]
    unknown = []
    for caller in reg.pm.get_hookcallers(plugin) or []:
        if caller.has_spec() or all(i.optionalhook for i in caller.get_hookimpls() if i.plugin is plugin):
            continue
        close = difflib.get_close_matches(caller.name, specs, n=1)
        unknown.append(f"{caller.name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    if unknown:
        hooks = ", ".join(sorted(unknown))
        reg.mark_broken(reg.plugin_name(plugin), f"implements {hooks}, which is not a graphroute hook (see the hook reference)")


# Every ``register_*`` hook: the family it fills, the base class its classes subclass and,
# for query stages, the kind they must declare.
FAMILY_HOOKS: tuple[tuple[str, str, type, StageKind | None], ...] = (
    *((hook, "stages", Stage, kind) for kind, hook in STAGE_HOOKS.items()),
    ("register_loaders", "loaders", Loader, None),
    ("register_segmenters", "segmenters", Segmenter, None),
    ("register_embedders", "embedders", Embedder, None),
    ("register_extractors", "extractors", Extractor, None),
    ("register_index_steps", "index_steps", IndexStep, None),
    ("register_llm_clients", "llm_clients", LLMClient, None),
    ("register_stores", "stores", StoreBackend, None),
)


def _hook_result(hook: str, base: type, kind: StageKind | None, result: object) -> list[type]:
    """The classes a ``register_*`` hook returned, or a PluginError saying what it returned
    and what was expected."""
    expected = f"a list of {base.__name__} subclasses" + (f" with kind = StageKind.{kind.name}" if kind else "")
    if not isinstance(result, list | tuple):
        raise PluginError(f"returned {reprlib.repr(result)} from {hook}; expected {expected}, e.g. `return [MyClass]`")
    for item in result:
        if not isinstance(item, type) or not issubclass(item, base):
            raise PluginError(f"returned {reprlib.repr(result)} from {hook}, whose item {reprlib.repr(item)} is not "
                              f"a {base.__name__} subclass; expected {expected}")
        if kind is not None and getattr(item, "kind", None) != kind:
            raise PluginError(f"returned {item.__name__} from {hook}, but its kind is {getattr(item, 'kind', None)!r}; "
                              f"expected {expected}")
        if (why := _class_problem(item)) is not None:
            raise PluginError(f"returned {item.__name__} from {hook}, but {item.__name__} {why}")
    return list(result)


def _class_problem(cls: type) -> str | None:
    """What makes a registered class unusable, found when it registers rather than in the
    middle of a query: an abstract method left out, a slot declared as something other than
    a :class:`Slot`, ``Params`` not built on the family's base, a default its own field
    refuses."""
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        return f"is abstract: it does not define {missing}"
    stage = issubclass(cls, Stage)
    if stage:
        for attr in ("consumes", "produces", "reads"):
            declared = getattr(cls, attr)
            items = declared if isinstance(declared, tuple | list) else [declared]
            bad = [x for x in items if not isinstance(x, Slot)]
            if bad:
                return (f"has {reprlib.repr(bad[0])} in `{attr}`, which is not a Slot; declare slots as "
                        f"`{attr} = (Slot.EVIDENCE,)` (one of: {', '.join(s.name for s in Slot)})")
    params_base: type[BaseModel] = StageParams if stage else ComponentParams
    params = getattr(cls, "Params", params_base)
    if not isinstance(params, type) or not issubclass(params, params_base):
        return (f"has a Params that is not a {params_base.__name__} subclass: declare `class Params({params_base.__name__})` "
                "so an unknown key in a route is an error")
    return _default_problem(params)


def _default_problem(params: type[BaseModel]) -> str | None:
    """The first default of ``params`` that its own field refuses (``Field(0, ge=1)``)."""
    defaults = {name: f.get_default(call_default_factory=True)
                for name, f in params.model_fields.items() if not f.is_required()}
    try:
        params.model_validate(defaults)
    except ValidationError as exc:
        for e in exc.errors():
            if e["type"] != "missing" and e["loc"] and e["loc"][0] in defaults:
                name = e["loc"][0]
                return f"has a parameter `{name}` whose default its own field refuses ({defaults[name]!r}: {e['msg']})"
    return None


def _collect(reg: Registry) -> None:
    """Call every ``register_*`` hook and add what it returns to its family. A plugin with a
    bad result is broken as a whole: nothing of it is added."""
    results: list[tuple[Family[Any], str, list[type]]] = []
    for hook, family, base, kind in FAMILY_HOOKS:
        for impl in getattr(reg.pm.hook, hook).get_hookimpls():
            if impl.plugin_name in reg.broken_names():
                continue
            try:
                classes = _hook_result(hook, base, kind, impl.function())
            except PluginError as exc:
                reg.mark_broken(impl.plugin_name, str(exc))
                continue
            except Exception as exc:  # the hook itself raised
                reg.mark_broken(impl.plugin_name, f"raised {_exc_text(exc)} in {hook}", exc)
                continue
            results.append((getattr(reg, family), impl.plugin_name, classes))
    # First come, first served: built-ins register before entry points, entry points before
    # GRAPHROUTE_PLUGINS modules. A plugin one of whose names is taken is broken as a whole.
    by_plugin: dict[str, list[tuple[Family[Any], type]]] = {}
    for fam, plugin, classes in results:
        by_plugin.setdefault(plugin, []).extend((fam, cls) for cls in classes)
    for plugin, items in by_plugin.items():
        if plugin in reg.broken_names():
            continue
        own: set[tuple[str, str]] = set()
        why = None
        for fam, cls in items:
            key = (fam.title, getattr(cls, "name", ""))
            why = fam.clash(cls) or (f"registers {fam.title} {key[1]!r} twice" if key in own else None)
            if why is not None:
                break
            own.add(key)
        if why is not None:
            reg.mark_broken(plugin, why)
            continue
        for fam, cls in items:
            fam.add(cls, plugin)


_registry: Registry | None = None


def get_registry(*, keep_broken: bool = False) -> Registry:
    """The process-wide registry, built on first use. A broken plugin raises its PluginError
    on every call, unless ``keep_broken`` (the registry then lists it in ``broken``)."""
    global _registry
    if _registry is None:
        _registry = build_registry(keep_broken=True)
    if _registry.broken and not keep_broken:
        raise _registry.broken_error()
    return _registry


def reset_registry() -> None:
    """Forget the cached registry (after installing a plugin in the same process)."""
    global _registry
    _registry = None
