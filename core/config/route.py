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
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from graphroute.core.config.yaml_lines import LINE_KEY, LineLoader, strip_lines
from graphroute.core.errors import RouteConfigError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

MergeMode = Literal["union", "rrf"]


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
    # parameters an override set, with where it came from ("command line", ...): a bad value
    # among them is the override's, not the file's
    overridden: dict[str, str] = Field(default_factory=dict, exclude=True)

    @field_validator("with_", mode="before")
    @classmethod
    def _no_line_keys(cls, value: Any) -> Any:
        return strip_lines(value)

    @property
    def key(self) -> str:
        return self.id or self.use or "?"

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"use": self.use, "id": self.key, "enabled": self.enabled}
        if self.with_:
            out["with"] = dict(self.with_)
        return out


class ParallelSpec(BaseModel):
    """Branches run on copies of the state and awaited together (they overlap where a stage
    awaits, e.g. a remote model call); their outputs are merged
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
    # a route is listed by its file's name; one whose `name:` says otherwise (a playground
    # export saved as my_route.yaml) is found by that name too, the name its results carry
    named = [f for f in routes.values() if _declared_name(f) == name_or_path]
    if len(named) == 1:
        return named[0]
    if named:
        raise RouteConfigError(
            f"route name {name_or_path!r} is declared by {len(named)} files: {', '.join(str(f) for f in named)}",
            fix="name the route by its file name or path, or give the files distinct `name:`s",
        )
    close = difflib.get_close_matches(name_or_path, list(routes), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known routes: {', '.join(routes)}"
    raise RouteConfigError(
        f"unknown route {name_or_path!r}",
        fix=f"{hint} (`graphroute routes` lists them; GRAPHROUTE_ROUTES adds folders)",
    )


def _declared_name(path: Path) -> str | None:
    """The ``name:`` a route file gives itself (None when it cannot be read)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def parse_route_text(text: str, source: str, loader: type[LineLoader] = LineLoader) -> RouteConfig:
    """Parse YAML text into a :class:`RouteConfig` (no extends, no validation); ``loader``
    :class:`BoundedLineLoader` for a route a request sends."""
    try:
        data = yaml.load(text, Loader=loader)
    except RouteConfigError as exc:  # the bounded loader's refusal: said of this text
        exc.file = source
        exc.args = (exc.render(),)
        raise
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
                exc.file, exc.line = str(path), _key_line(text, "extends") or cfg.line
                exc.args = (exc.render(),)
            raise
        cfg = _apply_extends(parent, cfg)
    check_unique_ids(cfg)
    return cfg


def _key_line(text: str, key: str) -> int | None:
    """The line (1-based) of a top-level ``key:`` in a route's text."""
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(f"{key}:"):
            return n
    return None


def _resolve_parent(extends: str, child: Path) -> str:
    """The file a route's ``extends`` names: a sibling file first, then the route search
    path, never the child itself: a user's ``route2_local.yaml`` that extends
    ``route2_local`` (shadowing the shipped route to change it) extends the shipped one."""
    if extends.endswith((".yaml", ".yml")):
        return extends if Path(extends).is_absolute() else str(child.parent / extends)
    me = child.resolve()
    for folder in (child.parent, *route_search_path()):
        candidate = folder / f"{extends}.yaml"
        if candidate.is_file() and candidate.resolve() != me:
            return str(candidate)
    return str(child) if child.stem == extends else extends  # itself alone: an `extends` cycle


def _apply_extends(parent: RouteConfig, child: RouteConfig) -> RouteConfig:
    """Child entries patch the parent's stage with the same id; new ids are inserted at
    ``after``/``before`` or appended."""
    entries: list[Entry] = [e.model_copy(deep=True) for e in parent.stages]

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
        i = _index_of(entries, ce.key)
        if i is not None:
            target = entries[i]
        elif isinstance(ce, StageSpec):
            target = find_nested(ce.key)
        if target is not None and isinstance(ce, StageSpec) and isinstance(target, StageSpec):
            fields = ce.model_fields_set
            if "use" in fields and ce.use != target.use:  # another stage in its place, under its id
                target.id = target.key
                target.use, target.with_ = ce.use, {}
            if "enabled" in fields:
                target.enabled = ce.enabled
            if "with_" in fields:
                target.with_ = {**target.with_, **ce.with_}
            target.line, target.source = ce.line, ce.source
            if ce.after or ce.before:
                _move(entries, i, ce, child)
            continue
        if target is not None and isinstance(ce, ParallelSpec) and i is not None:
            entries[i] = ce
            continue
        if target is not None:
            raise RouteConfigError(
                f"cannot patch '{ce.key}': it is a {'parallel block' if isinstance(target, ParallelSpec) else 'stage'} in the parent route",
                file=child.source, line=ce.line, stage=ce.key, fix="give the new entry another id",
            )
        if isinstance(ce, StageSpec) and ce.use is None:  # a patch whose target is not there
            ids = [s.key for s in parent.iter_stages()]
            close = difflib.get_close_matches(ce.key, ids, n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise RouteConfigError(
                f"'{ce.key}' patches no stage of the parent route '{parent.name}'",
                file=child.source, line=ce.line, stage=ce.key,
                fix=f"{hint}its stage ids: {', '.join(ids)}; to add a new stage, name it with `use:`",
            )
        if ce.after or ce.before:
            _place(entries, ce, ce, child)
        else:
            entries.append(ce)
    return RouteConfig(
        name=child.name,
        description=child.description or parent.description,
        extends=None,
        stages=entries,
        source=child.source,
    )


def _index_of(entries: list[Entry], key: str | None) -> int | None:
    """Where the top-level entry with id ``key`` stands in ``entries``."""
    return next((i for i, e in enumerate(entries) if e.key == key), None)


def _move(entries: list[Entry], i: int | None, ce: StageSpec, child: RouteConfig) -> None:
    """Move the patched top-level entry ``entries[i]`` to ``ce``'s ``after``/``before``."""
    if i is None:
        raise RouteConfigError(
            f"`{'after' if ce.after else 'before'}: {ce.after or ce.before}` cannot move '{ce.key}': it is inside a parallel block of the parent route",
            file=child.source, line=ce.line, stage=ce.key,
            fix="patch it where it is (drop `after`/`before`), or disable it and add a stage under a new id",
        )
    _place(entries, entries.pop(i), ce, child)


def _place(entries: list[Entry], entry: Entry, ce: Entry, child: RouteConfig) -> None:
    """Insert ``entry`` at the top-level stage ``ce``'s ``after``/``before`` names."""
    anchor = ce.after or ce.before
    j = _index_of(entries, anchor)
    if j is None:
        raise RouteConfigError(
            f"`{'after' if ce.after else 'before'}: {anchor}` names no top-level stage of the parent route",
            file=child.source, line=ce.line, stage=ce.key,
            fix=f"use one of: {', '.join(e.key for e in entries)}",
        )
    entries.insert(j + 1 if ce.after else j, entry)


def check_unique_ids(cfg: RouteConfig) -> None:
    """Every stage has a `use`, and no two entries (stages or parallel blocks) share an id:
    an id is what overrides, toggles and the trace name."""
    seen: dict[str, StageSpec | ParallelSpec] = {}

    def claim(e: StageSpec | ParallelSpec, source: str | None) -> None:
        if e.key in seen:
            what = "parallel block" if isinstance(e, ParallelSpec) else "stage"
            fix = ("give each parallel block its own `id:`" if isinstance(e, ParallelSpec) and e.id is None
                   else "give one of them a distinct `id:`")
            raise RouteConfigError(
                f"duplicate {what} id '{e.key}' (also at line {seen[e.key].line})",
                file=source or cfg.source, line=e.line, stage=e.key, fix=fix,
            )
        seen[e.key] = e

    for entry in cfg.stages:
        if isinstance(entry, ParallelSpec):
            claim(entry, None)
    for s in cfg.iter_stages():
        if s.use is None:
            raise RouteConfigError(
                "stage entry has no `use`", file=s.source or cfg.source, line=s.line, stage=s.key,
                fix="name a registered stage with `use:` (`graphroute plugins` lists them)",
            )
        claim(s, s.source)
