"""Route configs: YAML in, a validated and fully resolved route out.

Resolution order, the same everywhere (CLI, HTTP API, Python API, benchmarks):

1. the YAML file, with ``extends`` applied (parent first, child entries patch it by ``id``);
2. environment overrides ``GRAPHROUTE__<ID>__<PARAM>=value`` (``..__ENABLED=0`` toggles);
3. explicit overrides: ``--set ID.PARAM=VALUE``, ``--disable ID``, ``--enable ID`` or the
   ``overrides`` mapping of the API.

Then every stage is checked against the registry: the stage exists, its parameters validate
against its ``Params`` model, and what it consumes was produced by an earlier enabled stage.
Every problem is a :class:`RouteConfigError` naming the file, the line, the stage id and a
fix; the CLI prints it and exits with code 2.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .registry import PluginError, Registry
from .stage import Slot, Stage, StageKind

ENV_PREFIX = "GRAPHROUTE__"
MergeMode = Literal["union", "rrf"]


class RouteConfigError(Exception):
    """A route config problem, with where it is and how to fix it."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        stage: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.stage = stage
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file or "<route>"
        if self.line:
            where += f":{self.line}"
        head = f"{where}: "
        if self.stage:
            head += f"stage '{self.stage}': "
        text = head + self.message
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


# --------------------------------------------------------------------------- YAML with lines

LINE_KEY = "__line__"


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that records the 1-based line of every mapping under ``__line__``."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
    mapping[LINE_KEY] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_lines(v) for k, v in value.items() if k != LINE_KEY}
    if isinstance(value, list):
        return [_strip_lines(v) for v in value]
    return value


# --------------------------------------------------------------------------- models


class StageSpec(BaseModel):
    """One stage entry: ``{use, id, enabled, with}`` (``after``/``before`` place a new
    stage when a route ``extends`` another)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    use: str | None = None
    id: str | None = None
    enabled: bool = True
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    after: str | None = None
    before: str | None = None
    line: int | None = Field(default=None, alias=LINE_KEY, exclude=True)
    # the file this entry (and ``line``) comes from: an inherited stage lives in the parent
    source: str | None = Field(default=None, exclude=True)

    @field_validator("with_", mode="before")
    @classmethod
    def _no_line_keys(cls, value: Any) -> Any:
        return _strip_lines(value)

    @property
    def key(self) -> str:
        return self.id or self.use or "?"

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"use": self.use, "id": self.key, "enabled": self.enabled}
        if self.with_:
            out["with"] = dict(self.with_)
        return out


class ParallelSpec(BaseModel):
    """Branches that run concurrently on copies of the state; their outputs are merged
    (``union``: by id, best score wins; ``rrf``: reciprocal-rank fusion of evidence)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    parallel: list[list[StageSpec]]
    id: str | None = None
    merge: MergeMode = "union"
    rrf_k: int = 60
    enabled: bool = True
    after: str | None = None
    before: str | None = None
    line: int | None = Field(default=None, alias=LINE_KEY, exclude=True)

    @property
    def key(self) -> str:
        return self.id or "parallel"

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.key, "merge": self.merge}
        if self.merge == "rrf":
            out["rrf_k"] = self.rrf_k
        if not self.enabled:
            out["enabled"] = False
        out["parallel"] = [[s.to_yaml() for s in branch] for branch in self.parallel]
        return out


Entry = StageSpec | ParallelSpec


class RouteConfig(BaseModel):
    """A route as written in YAML."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    description: str = ""
    extends: str | None = None
    stages: list[Entry] = Field(default_factory=list)
    source: str | None = Field(default=None, exclude=True)
    line: int | None = Field(default=None, alias=LINE_KEY, exclude=True)

    def iter_stages(self) -> Iterator[StageSpec]:
        """Every stage entry, branches included, in order."""
        for entry in self.stages:
            if isinstance(entry, ParallelSpec):
                for branch in entry.parallel:
                    yield from branch
            else:
                yield entry

    def stage_ids(self) -> list[str]:
        return [s.key for s in self.iter_stages()]

    def to_yaml_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "stages": [e.to_yaml() for e in self.stages],
        }

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_yaml_dict(), sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------- finding routes


def builtin_routes_dir() -> Path:
    return Path(str(resources.files("graphroute.routes")))


def route_search_path() -> list[Path]:
    """Where route names are looked up: $GRAPHROUTE_ROUTES (os.pathsep-separated), then the
    shipped routes."""
    paths = [Path(p) for p in os.environ.get("GRAPHROUTE_ROUTES", "").split(os.pathsep) if p]
    return [*paths, builtin_routes_dir()]


def list_routes() -> dict[str, Path]:
    """Route name -> file, earlier search-path entries shadowing later ones."""
    found: dict[str, Path] = {}
    for d in reversed(route_search_path()):
        if d.is_dir():
            for f in sorted(d.glob("*.yaml")):
                found[f.stem] = f
    return dict(sorted(found.items()))


def find_route(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not p.is_file():
            raise RouteConfigError(f"route file {name_or_path!r} does not exist", fix="check the path")
        return p
    routes = list_routes()
    if name_or_path in routes:
        return routes[name_or_path]
    close = difflib.get_close_matches(name_or_path, list(routes), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known routes: {', '.join(routes)}"
    raise RouteConfigError(
        f"unknown route {name_or_path!r}",
        fix=f"{hint} (`graphroute routes` lists them; GRAPHROUTE_ROUTES adds folders)",
    )


def parse_route_text(text: str, source: str) -> RouteConfig:
    """Parse YAML text into a :class:`RouteConfig` (no extends, no validation)."""
    try:
        data = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise RouteConfigError(f"malformed YAML: {problem}", file=source, line=line, fix="fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise RouteConfigError(
            "a route must be a YAML mapping with `name` and `stages`", file=source, line=1,
            fix="start the file with `name: my_route` and a `stages:` list",
        )
    data.setdefault("name", Path(source).stem)
    stages = data.get("stages")
    if stages is not None and not isinstance(stages, list):
        raise RouteConfigError("`stages` must be a list", file=source, line=data.get(LINE_KEY), fix="write `stages:` followed by `- use: ...` items")
    try:
        cfg = RouteConfig.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise _config_validation_error(exc, data, source) from None
    for spec in cfg.iter_stages():
        spec.source = source
    return cfg


def _config_validation_error(exc: ValidationError, data: dict[str, Any], source: str) -> RouteConfigError:
    err = exc.errors()[0]
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p in ("StageSpec", "ParallelSpec"))]
    line = data.get(LINE_KEY)
    stage = None
    node: Any = data
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict):
            line = node.get(LINE_KEY, line)
            if "use" in node or "id" in node:
                stage = node.get("id") or node.get("use")
    field_path = ".".join(str(p) for p in loc)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key `{loc[-1]}`"
        fix = "stage entries take `use`, `id`, `enabled`, `with` (and `after`/`before` in routes that extend another)"
    else:
        fix = f"correct `{field_path}`"
    return RouteConfigError(f"{msg} (at `{field_path}`)", file=source, line=line, stage=stage, fix=fix)


def load_route_file(name_or_path: str, _chain: tuple[str, ...] = ()) -> RouteConfig:
    """Load a route and apply ``extends`` (recursively, with cycle detection)."""
    path = find_route(name_or_path)
    key = str(path.resolve())
    if key in _chain:
        names = " -> ".join([Path(c).stem for c in _chain] + [path.stem])
        raise RouteConfigError(
            f"`extends` cycle: {names}", file=str(path), fix="make one of these routes stop extending the other"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RouteConfigError(f"cannot read route file: {exc}", file=str(path)) from None
    cfg = parse_route_text(text, str(path))
    if cfg.extends:
        try:
            parent = load_route_file(_resolve_parent(cfg.extends, path), (*_chain, key))
        except RouteConfigError as exc:
            if exc.file is None:
                exc.file, exc.line = str(path), cfg.line
                exc.args = (exc.render(),)
            raise
        cfg = _apply_extends(parent, cfg)
    _check_unique_ids(cfg)
    return cfg


def _resolve_parent(extends: str, child: Path) -> str:
    sibling = child.parent / f"{extends}.yaml"
    if not extends.endswith((".yaml", ".yml")) and sibling.is_file():
        return str(sibling)
    if extends.endswith((".yaml", ".yml")) and not Path(extends).is_absolute():
        return str(child.parent / extends)
    return extends


def _apply_extends(parent: RouteConfig, child: RouteConfig) -> RouteConfig:
    """Child entries patch the parent's stage with the same id; new ids are inserted at
    ``after``/``before`` or appended."""
    entries: list[Entry] = [e.model_copy(deep=True) for e in parent.stages]

    def index_of(stage_id: str) -> int | None:
        for i, e in enumerate(entries):
            if e.key == stage_id:
                return i
        return None

    def find_nested(stage_id: str) -> StageSpec | None:
        for e in entries:
            if isinstance(e, ParallelSpec):
                for branch in e.parallel:
                    for s in branch:
                        if s.key == stage_id:
                            return s
        return None

    for ce in child.stages:
        target: Entry | None = None
        i = index_of(ce.key)
        if i is not None:
            target = entries[i]
        elif isinstance(ce, StageSpec):
            target = find_nested(ce.key)
        if target is not None and isinstance(ce, StageSpec) and isinstance(target, StageSpec):
            fields = ce.model_fields_set
            if "use" in fields and ce.use != target.use:
                target.use, target.with_ = ce.use, {}
            if "enabled" in fields:
                target.enabled = ce.enabled
            if "with_" in fields:
                target.with_ = {**target.with_, **ce.with_}
            target.line, target.source = ce.line, ce.source
            continue
        if target is not None and isinstance(ce, ParallelSpec) and i is not None:
            entries[i] = ce
            continue
        if target is not None:
            raise RouteConfigError(
                f"cannot patch '{ce.key}': it is a {'parallel block' if isinstance(target, ParallelSpec) else 'stage'} in the parent route",
                file=child.source, line=ce.line, stage=ce.key, fix="give the new entry another id",
            )
        anchor = ce.after or ce.before
        if anchor is not None:
            j = index_of(anchor)
            if j is None:
                raise RouteConfigError(
                    f"`{'after' if ce.after else 'before'}: {anchor}` names no top-level stage of the parent route",
                    file=child.source, line=ce.line, stage=ce.key,
                    fix=f"use one of: {', '.join(e.key for e in entries)}",
                )
            entries.insert(j + 1 if ce.after else j, ce)
        else:
            entries.append(ce)
    return RouteConfig(
        name=child.name,
        description=child.description or parent.description,
        extends=None,
        stages=entries,
        source=child.source,
    )


def _check_unique_ids(cfg: RouteConfig) -> None:
    seen: dict[str, StageSpec] = {}
    for s in cfg.iter_stages():
        if s.use is None:
            raise RouteConfigError(
                "stage entry has no `use`", file=s.source or cfg.source, line=s.line, stage=s.key,
                fix="name a registered stage with `use:` (`graphroute plugins` lists them)",
            )
        if s.key in seen:
            raise RouteConfigError(
                f"duplicate stage id '{s.key}' (also at line {seen[s.key].line})",
                file=s.source or cfg.source, line=s.line, stage=s.key,
                fix="give one of them a distinct `id:`",
            )
        seen[s.key] = s


# --------------------------------------------------------------------------- overrides


@dataclass
class Overrides:
    """Parameter values and toggles by stage id, from one source (env, CLI or API)."""

    params: dict[tuple[str, str], Any] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=dict)
    origin: str = "override"
    strict: bool = True  # unknown stage ids are an error (not for the environment)

    def merged(self, other: Overrides) -> Overrides:
        """``other`` wins."""
        return Overrides(
            {**self.params, **other.params}, {**self.enabled, **other.enabled}, other.origin, other.strict
        )

    def is_empty(self) -> bool:
        return not self.params and not self.enabled


def parse_value(text: str) -> Any:
    """``0.4`` -> float, ``true`` -> bool, ``[a, b]`` -> list, anything else -> str."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def overrides_from_cli(
    sets: Iterable[str] = (), disable: Iterable[str] = (), enable: Iterable[str] = ()
) -> Overrides:
    ov = Overrides(origin="command line")
    for item in sets:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise RouteConfigError(
                f"bad --set {item!r}", fix="write --set STAGE_ID.PARAM=VALUE, e.g. --set score_gap.threshold=0.4"
            )
        key, value = item.split("=", 1)
        stage_id, param = key.split(".", 1)
        if param == "enabled":
            ov.enabled[stage_id] = bool(parse_value(value))
        else:
            ov.params[(stage_id, param)] = parse_value(value)
    for s in disable:
        ov.enabled[s] = False
    for s in enable:
        ov.enabled[s] = True
    return ov


def overrides_from_env(environ: Mapping[str, str] | None = None) -> Overrides:
    """``GRAPHROUTE__SCORE_GAP__THRESHOLD=0.4`` and ``GRAPHROUTE__SCORE_GAP__ENABLED=0``.
    Ids are matched case-insensitively; ids not in the route are ignored (the environment
    applies to every route)."""
    ov = Overrides(origin="environment", strict=False)
    for name, value in (environ if environ is not None else os.environ).items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].split("__")
        if len(parts) != 2 or not all(parts):
            continue
        stage_id, param = parts[0].lower(), parts[1].lower()
        if param == "enabled":
            ov.enabled[stage_id] = value.strip().lower() not in ("0", "false", "no", "off", "")
        else:
            ov.params[(stage_id, param)] = parse_value(value)
    return ov


def overrides_from_mapping(mapping: Mapping[str, Any] | None) -> Overrides:
    """API form: ``{"score_gap.threshold": 0.4, "score_gap.enabled": False}`` or nested
    ``{"score_gap": {"threshold": 0.4, "enabled": False}}``."""
    ov = Overrides(origin="API overrides")
    for key, value in (mapping or {}).items():
        if isinstance(value, Mapping):
            for param, v in value.items():
                if param == "enabled":
                    ov.enabled[key] = bool(v)
                else:
                    ov.params[(key, param)] = v
        elif "." in key:
            stage_id, param = key.split(".", 1)
            if param == "enabled":
                ov.enabled[stage_id] = bool(value)
            else:
                ov.params[(stage_id, param)] = value
        else:
            raise RouteConfigError(
                f"bad override key {key!r}", fix='use "STAGE_ID.PARAM" or {"STAGE_ID": {"PARAM": value}}'
            )
    return ov


def apply_overrides(cfg: RouteConfig, ov: Overrides) -> RouteConfig:
    cfg = cfg.model_copy(deep=True)
    by_id: dict[str, StageSpec | ParallelSpec] = {s.key: s for s in cfg.iter_stages()}
    for e in cfg.stages:
        if isinstance(e, ParallelSpec):
            by_id.setdefault(e.key, e)
    lower = {k.lower(): k for k in by_id}

    def target(stage_id: str) -> StageSpec | ParallelSpec | None:
        key = stage_id if stage_id in by_id else lower.get(stage_id.lower()) if not ov.strict else None
        if key is None:
            if ov.strict:
                close = difflib.get_close_matches(stage_id, list(by_id), n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise RouteConfigError(
                    f"{ov.origin} name stage id '{stage_id}', which route '{cfg.name}' does not have",
                    file=cfg.source, stage=stage_id,
                    fix=f"{hint}stage ids of this route: {', '.join(by_id)}",
                )
            return None
        return by_id[key]

    for (stage_id, param), value in ov.params.items():
        t = target(stage_id)
        if t is None:
            continue
        if isinstance(t, ParallelSpec):
            raise RouteConfigError(
                f"'{stage_id}' is a parallel block; only `enabled` can be overridden", file=cfg.source, stage=stage_id,
                fix="override the stages inside the block by their ids",
            )
        t.with_ = {**t.with_, param: value}
    for stage_id, on in ov.enabled.items():
        t = target(stage_id)
        if t is not None:
            t.enabled = on
    return cfg


# --------------------------------------------------------------------------- validation


@dataclass
class ResolvedStage:
    spec: StageSpec
    cls: type[Stage]
    params: Any


@dataclass
class ResolvedParallel:
    spec: ParallelSpec
    branches: list[list[ResolvedStage]]


ResolvedEntry = ResolvedStage | ResolvedParallel


@dataclass
class ResolvedRoute:
    """A route ready to run: validated stage classes and params, defaults filled in."""

    config: RouteConfig
    entries: list[ResolvedEntry]

    @property
    def name(self) -> str:
        return self.config.name

    def to_yaml(self) -> str:
        return self.config.to_yaml()

    def stages(self) -> Iterator[ResolvedStage]:
        for e in self.entries:
            if isinstance(e, ResolvedParallel):
                for b in e.branches:
                    yield from b
            else:
                yield e

    def toggleable(self) -> list[str]:
        """Ids of stages that can be switched off without breaking the route (ablation)."""
        return [s.spec.key for s in self.stages() if s.cls.kind == StageKind.DENOISER]


def _resolve_stage(spec: StageSpec, cfg: RouteConfig, registry: Registry) -> ResolvedStage:
    assert spec.use is not None
    try:
        cls = registry.stages.get(spec.use)
    except PluginError:
        close = difflib.get_close_matches(spec.use, registry.stages.names(), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise RouteConfigError(
            f"unknown stage `{spec.use}`", file=spec.source or cfg.source, line=spec.line, stage=spec.key,
            fix=f"{hint}`graphroute plugins` lists the registered stages; install the plugin that provides it",
        ) from None
    try:
        params = cls.Params(**spec.with_)
    except ValidationError as exc:
        err = exc.errors()[0]
        pname = ".".join(str(p) for p in err["loc"]) or "?"
        fields = ", ".join(f"{k} ({_type_name(f.annotation)}, default {f.default!r})" for k, f in cls.Params.model_fields.items())
        if err["type"] == "extra_forbidden":
            msg = f"unknown parameter `{pname}` for stage `{spec.use}`"
        else:
            msg = f"bad value for `{pname}` of stage `{spec.use}`: {err['msg']} (got {err.get('input')!r})"
        raise RouteConfigError(
            msg, file=spec.source or cfg.source, line=spec.line, stage=spec.key,
            fix=f"parameters of `{spec.use}`: {fields or 'none'}",
        ) from None
    spec.with_ = params.model_dump(mode="json")
    return ResolvedStage(spec, cls, params)


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _check_order(
    stages: list[ResolvedStage],
    available: set[Slot],
    cfg: RouteConfig,
    producers: dict[Slot, str],
    after_synth: list[str],
    registry: Registry,
) -> set[Slot]:
    available = set(available)
    for rs in stages:
        if not rs.spec.enabled:
            continue
        if after_synth and Slot.ANSWER not in rs.cls.consumes:
            raise RouteConfigError(
                f"stage `{rs.spec.use}` comes after the synthesizer '{after_synth[0]}', which has already answered",
                file=rs.spec.source or cfg.source, line=rs.spec.line, stage=rs.spec.key,
                fix=f"move '{rs.spec.key}' before '{after_synth[0]}'",
            )
        missing = [s for s in rs.cls.consumes if s not in available]
        if missing:
            slot = missing[0]
            makers = sorted(e.name for e in registry.stages.entries.values() if slot in e.cls.produces)[:4]
            disabled = producers.get(slot)
            if disabled:
                fix = f"enable '{disabled}' (it produces `{slot.value}`) or disable '{rs.spec.key}' too"
            else:
                fix = f"put '{rs.spec.key}' after a stage that produces `{slot.value}`" + (f", e.g. {', '.join(makers)}" if makers else "")
            raise RouteConfigError(
                f"`{rs.spec.use}` needs `{slot.value}` but no earlier enabled stage produces it",
                file=rs.spec.source or cfg.source, line=rs.spec.line, stage=rs.spec.key, fix=fix,
            )
        available.update(rs.cls.produces)
        if rs.cls.kind == StageKind.SYNTHESIZER:
            after_synth.append(rs.spec.key)
    return available


def _disabled_producers(stages: Iterable[ResolvedStage]) -> dict[Slot, str]:
    out: dict[Slot, str] = {}
    for rs in stages:
        if not rs.spec.enabled:
            for slot in rs.cls.produces:
                out.setdefault(slot, rs.spec.key)
    return out


def resolve_route(cfg: RouteConfig, registry: Registry) -> ResolvedRoute:
    """Check every stage and the order; fill in parameter defaults."""
    cfg = cfg.model_copy(deep=True)
    _check_unique_ids(cfg)
    if not any(True for _ in cfg.iter_stages()):
        raise RouteConfigError("route has no stages", file=cfg.source, fix="add a `stages:` list")
    entries: list[ResolvedEntry] = []
    for e in cfg.stages:
        if isinstance(e, ParallelSpec):
            if not e.parallel or any(not b for b in e.parallel):
                raise RouteConfigError("a parallel block needs at least one non-empty branch", file=cfg.source, line=e.line, stage=e.key, fix="list branches as `- [stage, stage]`")
            entries.append(ResolvedParallel(e, [[_resolve_stage(s, cfg, registry) for s in b] for b in e.parallel]))
        else:
            entries.append(_resolve_stage(e, cfg, registry))
    route = ResolvedRoute(cfg, entries)
    producers = _disabled_producers(route.stages())
    available: set[Slot] = {Slot.QUERY}
    after_synth: list[str] = []
    for entry in entries:
        if isinstance(entry, ResolvedParallel):
            if not entry.spec.enabled:
                continue
            union: set[Slot] = set(available)
            for branch in entry.branches:
                union |= _check_order(branch, available, cfg, producers, list(after_synth), registry)
            available = union
        else:
            available = _check_order([entry], available, cfg, producers, after_synth, registry)
    return route


def load_route(
    name_or_path: str,
    registry: Registry,
    *,
    overrides: Overrides | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResolvedRoute:
    """The one way every entry point loads a route: file + extends, env, overrides, checks."""
    cfg = load_route_file(name_or_path)
    cfg = apply_overrides(cfg, overrides_from_env(environ))
    if overrides is not None and not overrides.is_empty():
        cfg = apply_overrides(cfg, overrides)
    return resolve_route(cfg, registry)
