"""The playground: a page ``graphroute serve`` shows at ``/`` to compose a route, switch its
stages on and off, and compare two configurations on the same question.

The page (``static/``: plain HTML, CSS and JavaScript modules, no build step, nothing fetched
from outside the server) talks only to the endpoints below, which sit behind the same
bearer-token check as the rest of the API. It keeps a configuration in the command line's
own override form - ``--set ID.PARAM=VALUE``, ``--disable ID``, ``--enable ID`` - and every
endpoint reads it with the CLI's parser (:func:`overrides_from_cli`) and the one route loader
(:func:`load_route`), so a value is parsed, validated and reported exactly as
``graphroute query`` would. Question sets are scored with the benchmark's own record,
aggregate and comparison functions (:mod:`graphroute.core.bench`), as ``graphroute ab`` does.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np
import yaml
from graphroute.core.api.models import EdgeType, Label, QueryResult
from graphroute.core.api.stage import QueryState
from graphroute.core.apps.bench.bench import (
    HIGHER_IS_BETTER,
    Variant,
    VariantRun,
    aggregate,
    compare,
    ranked_passages,
    score_record,
)
from graphroute.core.apps.bench.datasets import Question
from graphroute.core.apps.bench.metrics import dedupe
from graphroute.core.apps.serve.server import (
    MAX_PAGE_LIMIT,
    NAME_PATTERN,
    ApiError,
    QueryResponse,
    SourceNames,
    _error_responses,
    redact_paths,
    refuse_server_side,
)
from graphroute.core.config.overrides import Overrides, overrides_from_cli
from graphroute.core.config.resolve import ResolvedRoute, load_route
from graphroute.core.config.route import ParallelSpec, StageSpec, parse_route_text
from graphroute.core.config.yaml_lines import BoundedLineLoader
from graphroute.core.errors import RouteConfigError
from graphroute.core.index.manage import MAX_GROUP_CHARS
from graphroute.core.query.runner import run_route
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from fastapi import FastAPI
    from graphroute.core.api.store import GraphStore
    from graphroute.core.engine import GraphRoute
    from graphroute.core.registry import Registry

T = TypeVar("T")


class RunLimited(Protocol):
    """The server's ``run_limited``: blocking work in the query pool, under the time limit."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


STATIC_DIR = Path(__file__).resolve().parent / "static"
PASTED = "<pasted route>"  # the file name route errors show for YAML sent to /playground/import
MAX_SET_QUESTIONS = 50
GRAPH_SEEDS, GRAPH_ENTITIES, GRAPH_PASSAGES = 10, 12, 10
ENTITY_EDGES = (EdgeType.RELATION, EdgeType.CO_OCCURS, EdgeType.SEMANTICALLY_SIMILAR)
# the page loads nothing but its own files: a CDN asset or an inline script would be blocked
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


# --------------------------------------------------------------------------- API models


class PlaygroundConfig(BaseModel):
    """One configuration: a route and overrides, written as on the command line."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    route: str = Field(pattern=NAME_PATTERN, description="a route name (`GET /routes`)")
    set_: list[str] = Field(
        default_factory=list, alias="set", max_length=1000,
        description="`STAGE_ID.PARAM=VALUE` items, exactly as `--set` takes them (VALUE is YAML: 0.4, true, [a, b])",
    )
    disable: list[str] = Field(default_factory=list, max_length=1000, description="stage or parallel-block ids switched off")
    enable: list[str] = Field(default_factory=list, max_length=1000, description="stage or parallel-block ids switched on")

    def overrides(self) -> Overrides:
        return overrides_from_cli(self.set_, self.disable, self.enable)


class InfoResponse(BaseModel):
    groups: list[str] = Field(description=f"the store's groups by name, the first {MAX_PAGE_LIMIT:,} (and the default group)")
    group: str = Field(description="the server's default group")
    route: str = Field(description="the server's default route")


class ParamView(BaseModel):
    name: str
    value: Any = Field(description="the resolved value")
    text: str = Field(description="the value as `--set` takes it (YAML)")
    widget: Literal["bool", "integer", "number", "choice", "text", "yaml"]
    choices: list[Any] = Field(default_factory=list)
    nullable: bool = False
    default: Any = None
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None


class StageView(BaseModel):
    id: str
    use: str
    kind: str
    enabled: bool
    description: str
    block: str | None = Field(None, description="the parallel block the stage runs in")
    consumes: list[str]
    produces: list[str]
    params: list[ParamView]


class BlockView(BaseModel):
    id: str
    merge: str
    enabled: bool
    stages: list[str]


class RouteView(BaseModel):
    name: str
    description: str
    stages: list[StageView] = Field(description="every stage in run order, parallel branches included")
    blocks: list[BlockView]


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: PlaygroundConfig
    question: str | None = Field(None, max_length=20_000, description="put into the exported command")
    group: str | None = Field(None, min_length=1, max_length=MAX_GROUP_CHARS, description="put into the exported command")


class FieldError(BaseModel):
    stage: str | None = Field(None, description="the stage id the message is about")
    param: str | None = Field(None, description="the parameter, when one value is wrong")
    message: str = Field(description="the message `graphroute query` prints for the same overrides")


class ResolveResponse(BaseModel):
    ok: bool
    errors: list[FieldError]
    changed: dict[str, list[str]] = Field(
        default_factory=dict, description="stage id -> what differs from the route: parameter names and/or `enabled`")
    yaml: str | None = Field(None, description="a route file reproducing the configuration: `extends` plus the changed stages")
    command: str | None = Field(None, description="the equivalent `graphroute query` line")


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    yaml: str = Field(min_length=1, max_length=100_000, description="a route file that `extends` another route")


class ImportResponse(BaseModel):
    name: str
    description: str
    config: PlaygroundConfig


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    group: str | None = Field(None, min_length=1, max_length=MAX_GROUP_CHARS)
    config: PlaygroundConfig


class GraphNode(BaseModel):
    id: str
    label: str = Field(description="the store label: Entity, TextChunk, Sentence, ...")
    name: str
    roles: list[Literal["seed", "ranked", "passage"]]
    score: float | None = Field(None, description="ranked entities: the score after the route's denoisers; passages: the evidence score")
    weight: float | None = Field(None, description="seeds: the teleport weight")
    text: str = ""


class GraphEdge(BaseModel):
    src: str
    dst: str
    type: str


class GraphView(BaseModel):
    """The neighbourhood the route used: its seeds, the entities it ranked (PPR), the passages
    it chose, and the graph's edges between them."""

    nodes: list[GraphNode]
    edges: list[GraphEdge]


class RunResponse(BaseModel):
    result: QueryResponse
    graph: GraphView
    params: dict[str, dict[str, Any]] = Field(description="stage id -> the resolved parameters the run used")
    enabled: dict[str, bool]


class ABRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    group: str | None = Field(None, min_length=1, max_length=MAX_GROUP_CHARS)
    a: PlaygroundConfig
    b: PlaygroundConfig


class EvidenceMove(BaseModel):
    id: str
    document: str
    section_path: str
    text: str
    rank_a: int | None = None
    rank_b: int | None = None
    score_a: float | None = None
    score_b: float | None = None


class StageDiff(BaseModel):
    stage: str
    in_a: bool
    in_b: bool
    changes: list[str] = Field(description="what differs: enabled, params, items_in, items_out, stats")
    params: dict[str, list[Any]] = Field(default_factory=dict, description="parameter -> [A, B]")
    stats: list[str] = Field(default_factory=list, description="stat keys whose values differ")


class ABDiff(BaseModel):
    entered: list[EvidenceMove] = Field(description="evidence B has and A does not")
    left: list[EvidenceMove] = Field(description="evidence A has and B does not")
    moved: list[EvidenceMove] = Field(description="evidence both have, at different ranks")
    stages: list[StageDiff] = Field(description="one row per stage id of either run, in run order")
    answer_changed: bool


class ABResponse(BaseModel):
    a: RunResponse
    b: RunResponse
    diff: ABDiff


class SetQuestion(BaseModel):
    """A question of a set, in the JSONL question format of ``graphroute bench``."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, max_length=200)
    question: str = Field(min_length=1, max_length=20_000)
    answer: str | None = Field(None, max_length=20_000)
    aliases: list[str] = Field(default_factory=list, max_length=50)
    gold: list[str] = Field(default_factory=list, max_length=50, description="gold documents: titles or document ids")
    answerable: bool | None = Field(None, description="default: true when an answer is given")


class QuestionSetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str | None = Field(None, min_length=1, max_length=MAX_GROUP_CHARS)
    a: PlaygroundConfig
    b: PlaygroundConfig
    questions: list[SetQuestion] = Field(min_length=1, max_length=MAX_SET_QUESTIONS)


class QuestionSetResponse(BaseModel):
    comparison: dict[str, Any] = Field(description="what `graphroute ab --json` prints: metrics, deltas, wins/losses, verdict")
    a: list[dict[str, Any]] = Field(description="A's per-question records (bench's fields; passages are indexes into `documents`)")
    b: list[dict[str, Any]]
    documents: list[str] = Field(
        description="the titles of the documents the records name: their `gold` and `ranked` are indexes into this list",
    )
    unresolved_gold: list[str] = Field(description="gold references that name no document of the group")
    higher_is_better: dict[str, bool]


# --------------------------------------------------------------------------- values


class _FlowMap(dict[str, Any]):
    """A mapping written on one line (a stage's `with`), as route files write it."""


class _RouteDumper(yaml.SafeDumper):
    """Block style with indented lists, `with` maps on one line: the shipped routes' look."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_RouteDumper.add_representer(
    _FlowMap, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True))


def cli_value(value: Any) -> str:
    """``value`` as ``--set`` reads it back (YAML, one line): 0.4, true, null, [a, b], 'x: y'."""
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, allow_unicode=True).strip()  # type: ignore[arg-type]
    return text.removesuffix("...").strip()


def _schema_type(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The JSON types a property allows and the merged constraints of its non-null branch."""
    if "$ref" in prop:
        prop = {**defs.get(prop["$ref"].rsplit("/", 1)[-1], {}), **{k: v for k, v in prop.items() if k != "$ref"}}
    if "anyOf" in prop:
        types: list[str] = []
        merged: dict[str, Any] = {}
        for branch in prop["anyOf"]:
            t, m = _schema_type(branch, defs)
            types += t
            if "null" not in t:
                merged = {**m, **merged}
        return types, merged
    if "enum" in prop or "const" in prop:
        return ["enum"], prop
    t = prop.get("type", "any")
    return (t if isinstance(t, list) else [t]), prop


def param_views(cls: Any, values: dict[str, Any]) -> list[ParamView]:
    """One editable field per parameter of a stage's ``Params`` model."""
    schema = cls.Params.model_json_schema()
    defs = schema.get("$defs", {})
    out = []
    for name, prop in schema.get("properties", {}).items():
        types, main = _schema_type(prop, defs)
        non_null = [t for t in types if t != "null"]
        widget: str = "text"
        choices: list[Any] = []
        if non_null == ["boolean"]:
            widget = "bool"
        elif non_null == ["enum"]:
            widget, choices = "choice", list(main.get("enum", [main.get("const")]))
        elif non_null == ["integer"]:
            widget = "integer"
        elif non_null in (["number"], ["integer", "number"], ["number", "integer"]):
            widget = "number"
        elif any(t in ("array", "object", "any") for t in non_null) or len(non_null) > 1:
            widget = "yaml"
        value = values.get(name)
        out.append(ParamView(
            name=name, value=value, text=cli_value(value), widget=widget,  # type: ignore[arg-type]
            choices=choices, nullable="null" in types, default=prop.get("default"),
            description=str(prop.get("description") or ""),
            minimum=main.get("minimum", main.get("exclusiveMinimum")),
            maximum=main.get("maximum", main.get("exclusiveMaximum")),
        ))
    return out


# --------------------------------------------------------------------------- route views


def route_view(resolved: ResolvedRoute) -> RouteView:
    stages: list[StageView] = []
    blocks: list[BlockView] = []
    block_of: dict[str, str] = {}
    for entry in resolved.config.stages:
        if isinstance(entry, ParallelSpec):
            ids = [s.key for branch in entry.parallel for s in branch]
            blocks.append(BlockView(id=entry.key, merge=entry.merge, enabled=entry.enabled, stages=ids))
            block_of.update(dict.fromkeys(ids, entry.key))
    for rs in resolved.stages():
        stages.append(StageView(
            id=rs.spec.key, use=rs.cls.name, kind=rs.cls.kind.value, enabled=rs.spec.enabled,
            description=rs.cls.describe(), block=block_of.get(rs.spec.key),
            consumes=[s.value for s in rs.cls.consumes], produces=[s.value for s in rs.cls.produces],
            params=param_views(rs.cls, dict(rs.spec.with_)),
        ))
    return RouteView(name=resolved.name, description=resolved.config.description.strip(), stages=stages, blocks=blocks)


def _params_of(resolved: ResolvedRoute) -> dict[str, dict[str, Any]]:
    return {rs.spec.key: dict(rs.spec.with_) for rs in resolved.stages()}


def _enabled_of(resolved: ResolvedRoute) -> dict[str, bool]:
    out = {e.key: e.enabled for e in resolved.config.stages if isinstance(e, ParallelSpec)}
    out.update({rs.spec.key: rs.spec.enabled for rs in resolved.stages()})
    return out


# --------------------------------------------------------------------------- validation


def validate(route: str, config: PlaygroundConfig, registry: Registry) -> list[FieldError]:
    """Every problem of the configuration, each with the message the CLI prints, a server
    file named by its last part as every other API message names it (``route2_local.yaml:85``).

    Each ``--set`` value is checked on its own first, so every wrong field gets its own
    message; then the whole configuration (switches included) without the wrong values."""
    return [e.model_copy(update={"message": redact_paths(e.message)}) for e in _problems(route, config, registry)]


def _problems(route: str, config: PlaygroundConfig, registry: Registry) -> list[FieldError]:
    try:
        ov = config.overrides()
    except RouteConfigError as exc:
        return [FieldError(message=exc.render())]
    errors: list[FieldError] = []
    bad: set[tuple[str, str]] = set()
    base = load_route(route, registry)
    for key, value in ov.params.items():
        try:
            one = Overrides({key: value}, {}, ov.origin, ov.strict)
            refuse_server_side(base, one)
            load_route(route, registry, overrides=one)
        except RouteConfigError as exc:
            bad.add(key)
            errors.append(FieldError(stage=exc.stage or key[0], param=key[1], message=exc.render()))
    rest = Overrides({k: v for k, v in ov.params.items() if k not in bad}, dict(ov.enabled), ov.origin, ov.strict)
    try:
        load_route(route, registry, overrides=rest)
    except RouteConfigError as exc:
        errors.append(FieldError(stage=exc.stage, message=exc.render()))
    return errors


def changes(base: ResolvedRoute, current: ResolvedRoute) -> dict[str, list[str]]:
    """Stage and block id -> what the current configuration changes: parameter names, `enabled`."""
    out: dict[str, list[str]] = {}
    base_params, base_enabled = _params_of(base), _enabled_of(base)
    for key, on in _enabled_of(current).items():
        if base_enabled.get(key) != on:
            out.setdefault(key, []).append("enabled")
    for key, params in _params_of(current).items():
        before = base_params.get(key, {})
        names = [p for p, v in params.items() if before.get(p) != v]
        if names:
            out.setdefault(key, []).extend(names)
    return out


def export_yaml(base: ResolvedRoute, current: ResolvedRoute, changed: dict[str, list[str]]) -> str:
    """A route file that reproduces ``current``: it extends the route and lists only the
    changed stages (a switched parallel block is written whole: `extends` replaces blocks)."""
    params = _params_of(current)
    enabled = _enabled_of(current)
    entries: list[dict[str, Any]] = []
    summary: list[str] = []

    def patch(spec: StageSpec) -> None:
        what = changed.get(spec.key)
        if not what:
            return
        entry: dict[str, Any] = {"id": spec.key}
        if "enabled" in what:
            entry["enabled"] = enabled[spec.key]
            summary.append(f"{spec.key} {'on' if enabled[spec.key] else 'off'}")
        names = [p for p in what if p != "enabled"]
        if names:
            entry["with"] = _FlowMap({p: params[spec.key][p] for p in names})
            summary.extend(f"{spec.key}.{p}={cli_value(params[spec.key][p])}" for p in names)
        entries.append(entry)

    for e in current.config.stages:
        if isinstance(e, ParallelSpec):
            if "enabled" in changed.get(e.key, []):
                block = e.to_yaml() | {"enabled": e.enabled}
                for branch in block["parallel"]:
                    for st in branch:
                        if "with" in st:
                            st["with"] = _FlowMap(st["with"])
                entries.append(block)
                summary.append(f"{e.key} {'on' if e.enabled else 'off'}")
                continue
            for branch in e.parallel:
                for s in branch:
                    patch(s)
        else:
            patch(e)
    doc = {
        "name": f"{base.name}_custom",
        "description": f"{base.name} with " + ("; ".join(summary) if summary else "no changes"),
        "extends": base.name,
        "stages": entries,
    }
    return yaml.dump(doc, Dumper=_RouteDumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)


def export_command(route: str, current: ResolvedRoute, changed: dict[str, list[str]], question: str | None, group: str | None) -> str:
    """The `graphroute query` line with the same configuration (`--set`, `--disable`, `--enable`)."""
    params = _params_of(current)
    enabled = _enabled_of(current)
    args = ["graphroute", "query", question or "QUESTION"]
    if group:
        args += ["--group", group]
    args += ["--route", route]
    for key, what in changed.items():
        args += [a for p in what if p != "enabled" for a in ("--set", f"{key}.{p}={cli_value(params[key][p])}")]
    for key, what in changed.items():
        if "enabled" in what:
            args += ["--enable" if enabled[key] else "--disable", key]
    return " ".join(shlex.quote(a) for a in args)


def import_config(text: str, registry: Registry, known_route: Callable[[str], Any]) -> ImportResponse:
    """The configuration a route file describes, when it `extends` a route and only switches
    stages or sets their parameters (what the playground can show)."""
    import re

    cfg = parse_route_text(text, PASTED, BoundedLineLoader)
    parent = cfg.extends
    if not parent:
        raise RouteConfigError(
            "the route has no `extends`", file=PASTED, line=cfg.line,
            fix="the playground loads files that extend a route (`extends: route2_local`), as `Copy as YAML` writes them",
        )
    if not re.match(NAME_PATTERN, parent):
        raise RouteConfigError(f"`extends: {parent}` must name a route, not a file", file=PASTED, line=cfg.line,
                               fix="`GET /routes` lists the route names")
    known_route(parent)
    base = load_route(parent, registry)
    base_specs = {rs.spec.key: rs.spec for rs in base.stages()}
    base_blocks = {e.key: e for e in base.config.stages if isinstance(e, ParallelSpec)}
    sets: list[str] = []
    toggles: dict[str, bool] = {}

    def unsupported(key: str, line: int | None, why: str) -> RouteConfigError:
        return RouteConfigError(
            why, file=PASTED, line=line, stage=key,
            fix="the playground switches and sets the stages of one route; put this file in a "
                "$GRAPHROUTE_ROUTES folder and pick it by name",
        )

    def take_stage(spec: StageSpec, only_changes: bool) -> None:
        target = base_specs.get(spec.key)
        if target is None:
            raise unsupported(spec.key, spec.line, f"'{spec.key}' is not a stage of route '{parent}'")
        fields = spec.model_fields_set
        if spec.after or spec.before or ("use" in fields and spec.use != target.use):
            raise unsupported(spec.key, spec.line, f"'{spec.key}' moves or replaces a stage of route '{parent}'")
        if "enabled" in fields and (not only_changes or spec.enabled != target.enabled):
            toggles[spec.key] = spec.enabled
        for p, v in spec.with_.items():
            if not only_changes or target.with_.get(p) != v:
                sets.append(f"{spec.key}.{p}={cli_value(v)}")

    for entry in cfg.stages:
        if isinstance(entry, ParallelSpec):
            block = base_blocks.get(entry.key)
            ids = [s.key for b in entry.parallel for s in b]
            if block is None or ids != [s.key for b in block.parallel for s in b]:
                raise unsupported(entry.key, entry.line, f"parallel block '{entry.key}' is not one of route '{parent}' as it stands")
            if entry.enabled != block.enabled:
                toggles[entry.key] = entry.enabled
            for branch in entry.parallel:
                for s in branch:
                    take_stage(s, only_changes=True)
        elif entry.key in base_blocks and not entry.with_ and entry.use is None:
            if "enabled" in entry.model_fields_set:
                toggles[entry.key] = entry.enabled
        else:
            take_stage(entry, only_changes=False)
    config = PlaygroundConfig(
        route=parent, set_=sets,
        disable=[k for k, on in toggles.items() if not on], enable=[k for k, on in toggles.items() if on],
    )
    try:
        load_route(parent, registry, overrides=config.overrides())  # the same checks as the CLI
    except RouteConfigError as exc:
        # a stage the pasted file patches is reported at its line there, as the CLI reports a
        # patched stage of a route file that extends another
        lines = {s.key: s.line for s in cfg.iter_stages()} | {e.key: e.line for e in cfg.stages if isinstance(e, ParallelSpec)}
        if exc.stage in lines:
            exc.file, exc.line = PASTED, lines[exc.stage]
            exc.args = (exc.render(),)
        raise
    return ImportResponse(name=cfg.name, description=cfg.description.strip(), config=config)


# --------------------------------------------------------------------------- runs


def _top_seeds(state: QueryState, k: int) -> list[tuple[str, float]]:
    """The ``k`` heaviest seeds (node id, weight), records and arrays together."""
    weights: dict[str, float] = {}
    for s in state.seeds:
        if s.node_id and s.weight > 0:
            weights[s.node_id] = max(weights.get(s.node_id, 0.0), s.weight)
    for a in state.seed_arrays:
        if len(a) == 0:
            continue
        for i in np.argsort(-a.weights, kind="stable")[:k].tolist():
            w = float(a.weights[i])
            if w > 0:
                weights[a.node_ids[i]] = max(weights.get(a.node_ids[i], 0.0), w)
    return sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def neighbourhood(store: GraphStore, group: str, state: QueryState, result: QueryResult, names: SourceNames) -> GraphView:
    """Seeds, ranked entities and chosen passages of one run, with the edges among them:
    MENTIONS from a passage (or the chunk it belongs to) to an entity, and entity-entity edges
    (a passage named by its section path, a title that is a server path as ``names`` says)."""
    nodes: dict[str, GraphNode] = {}

    def add(node_id: str, role: Literal["seed", "ranked", "passage"], **fields: Any) -> None:
        node = nodes.get(node_id)
        if node is None:
            nodes[node_id] = GraphNode(**{"id": node_id, "label": "", "name": node_id, "roles": [role], **fields})
            return
        if role not in node.roles:
            node.roles.append(role)
        for key, value in fields.items():
            if getattr(node, key) in (None, ""):
                setattr(node, key, value)

    for node_id, weight in _top_seeds(state, GRAPH_SEEDS):
        add(node_id, "seed", weight=round(weight, 6))
    for ent in state.entities[:GRAPH_ENTITIES]:
        add(ent.id, "ranked", score=round(ent.score, 6), name=ent.name or ent.id)
    owner: dict[str, str] = {}  # the chunk of a sentence or paragraph -> the evidence id
    for ev in result.evidence[:GRAPH_PASSAGES]:
        add(ev.id, "passage", score=round(ev.score, 6), text=ev.text[:240])
        nodes[ev.id].name = names.label(ev.section_path or ev.document) or ev.id
        owner.setdefault(ev.id, ev.id)
        if ev.chunk_id:
            owner.setdefault(ev.chunk_id, ev.id)
    for node in store.get_nodes(group, list(nodes)):
        view = nodes[node.id]
        view.label = node.label
        if node.label == Label.ENTITY or view.name == node.id:
            view.name = names.label(str(node.props.get("name") or node.props.get("title") or view.name))
        if not view.text and node.label != Label.ENTITY:
            view.text = str(node.props.get("text") or "")[:240]
    entity_ids = [n.id for n in nodes.values() if n.label == Label.ENTITY]
    edges: dict[tuple[str, str, str], GraphEdge] = {}
    for e in store.edges_of(group, list(owner), [EdgeType.MENTIONS], "out"):
        src = owner.get(e.src)
        if src is not None and e.dst in nodes and e.dst != src:
            edges.setdefault((src, e.dst, e.type), GraphEdge(src=src, dst=e.dst, type=e.type))
    for e in store.edges_of(group, entity_ids, list(ENTITY_EDGES), "out"):
        if e.dst in nodes and e.dst != e.src and (e.dst, e.src, e.type) not in edges:
            edges.setdefault((e.src, e.dst, e.type), GraphEdge(src=e.src, dst=e.dst, type=e.type))
    for n in nodes.values():
        n.label = n.label or "?"
    return GraphView(nodes=list(nodes.values()), edges=list(edges.values())[:200])


def run_one(gr: GraphRoute, question: str, group: str, config: PlaygroundConfig, names: SourceNames) -> RunResponse:
    """Answer one question with one configuration; keep the blackboard for the graph view.
    Documents are named as ``POST /query`` names them (``names``): never by a server path."""
    if not question.strip():
        raise ApiError(400, "bad_request", "the question is empty")
    ov = config.overrides()
    refuse_server_side(gr.route(config.route), ov)
    resolved = gr.route(config.route, ov)
    state = QueryState(question=question, group=group)
    result = run_route(resolved, question, gr.services(group), state)
    return RunResponse(
        result=QueryResponse.model_validate(names.result(result.to_public_json())),
        graph=neighbourhood(gr.store, group, state, result, names),
        params=_params_of(resolved), enabled=_enabled_of(resolved),
    )


def diff_runs(a: RunResponse, b: RunResponse) -> ABDiff:
    """What B changes against A: evidence in and out, and per stage configuration and trace."""
    ev_a = {e.id: (i, e) for i, e in enumerate(a.result.evidence, start=1)}
    ev_b = {e.id: (i, e) for i, e in enumerate(b.result.evidence, start=1)}

    def move(eid: str) -> EvidenceMove:
        ra, ea = ev_a.get(eid, (None, None))
        rb, eb = ev_b.get(eid, (None, None))
        e = eb or ea
        assert e is not None
        return EvidenceMove(
            id=eid, document=e.document, section_path=e.section_path, text=e.text[:300],
            rank_a=ra, rank_b=rb, score_a=ea.score if ea else None, score_b=eb.score if eb else None,
        )

    trace_a = {t.stage: t for t in a.result.trace}
    trace_b = {t.stage: t for t in b.result.trace}
    stages = []
    for sid in dedupe([*trace_a, *trace_b]):
        ta, tb = trace_a.get(sid), trace_b.get(sid)
        pa, pb = a.params.get(sid, {}), b.params.get(sid, {})
        row = StageDiff(stage=sid, in_a=ta is not None, in_b=tb is not None, changes=[])
        if ta is None or tb is None:
            row.changes.append("stage")
            stages.append(row)
            continue
        if ta.enabled != tb.enabled:
            row.changes.append("enabled")
        row.params = {p: [pa.get(p), pb.get(p)] for p in dedupe([*pa, *pb]) if pa.get(p) != pb.get(p)}
        if row.params:
            row.changes.append("params")
        for key in ("items_in", "items_out"):
            if getattr(ta, key) != getattr(tb, key):
                row.changes.append(key)
        row.stats = [k for k in dedupe([*ta.stats, *tb.stats]) if ta.stats.get(k) != tb.stats.get(k)]
        if row.stats:
            row.changes.append("stats")
        stages.append(row)
    return ABDiff(
        entered=[move(i) for i in ev_b if i not in ev_a],
        left=[move(i) for i in ev_a if i not in ev_b],
        moved=[move(i) for i in ev_a if i in ev_b and ev_a[i][0] != ev_b[i][0]],
        stages=stages,
        answer_changed=a.result.answer != b.result.answer,
    )


def run_question_set(gr: GraphRoute, group: str, body: QuestionSetRequest, names: SourceNames) -> QuestionSetResponse:
    """Both configurations over the questions, scored and compared as `graphroute ab` does.
    The group's documents are the passages: gold references name documents by title or id
    (a title that is a server path also by the name ``names`` gives it)."""
    docs = sorted(gr.store.iter_nodes(group, Label.DOCUMENT), key=lambda n: n.id)
    titles = [names.label(str(d.props.get("title") or d.id)) for d in docs]
    doc_map = {d.id: i for i, d in enumerate(docs)}
    unresolved: list[str] = []
    questions: list[Question] = []
    for n, sq in enumerate(body.questions, start=1):
        gold: list[int] = []
        for ref in sq.gold:
            hits = [i for i, d in enumerate(docs) if d.id == ref or titles[i] == ref]
            if not hits:
                unresolved.append(ref)
            gold += [h for h in hits if h not in gold]
        answers = dedupe([a for a in [sq.answer, *sq.aliases] if a])
        answerable = sq.answerable if sq.answerable is not None else bool(answers)
        questions.append(Question(id=sq.id or f"q{n}", question=sq.question, answers=answers, gold=gold, answerable=answerable))
    services = gr.services(group)
    configs = [(label, config, config.overrides()) for label, config in (("A", body.a), ("B", body.b))]
    for _, config, ov in configs:
        refuse_server_side(gr.route(config.route), ov)
    resolved = [gr.route(config.route, ov) for _, config, ov in configs]
    records: list[list[dict[str, Any]]] = [[], []]
    for n, q in enumerate(questions):
        # A and B take turns going first, as `graphroute ab` measures them: whatever runs
        # first pays for cold caches, and the verdict reads per-question latency pairs
        for j in ((0, 1) if n % 2 == 0 else (1, 0)):
            services.clear_query_cache()  # each configuration pays for its own question embedding
            result = run_route(resolved[j], q.question, services)
            records[j].append(score_record(q, result, ranked_passages(result, doc_map, gr.store, group)))
    runs = [VariantRun(Variant(f"{label}:{config.route}", config.route, None if ov.is_empty() else ov), aggregate(recs), recs)
            for (label, config, ov), recs in zip(configs, records, strict=True)]
    comparison = compare(runs[0], runs[1])
    # the response lists the documents the records name (gold and ranked), not the whole
    # group: its size follows the question set, never the group's
    named = sorted({i for recs in records for rec in recs for key in ("gold", "ranked") for i in rec[key]})
    position = {doc: n for n, doc in enumerate(named)}
    for recs in records:
        for rec in recs:
            rec["gold"], rec["ranked"] = [position[i] for i in rec["gold"]], [position[i] for i in rec["ranked"]]
    return QuestionSetResponse(
        comparison=comparison, a=runs[0].per_question, b=runs[1].per_question,
        documents=[titles[i] for i in named], unresolved_gold=dedupe(unresolved), higher_is_better=HIGHER_IS_BETTER,
    )


# --------------------------------------------------------------------------- mounting


def mount_playground(app: FastAPI) -> None:
    """Serve the page at ``/``, its files under ``/playground/static`` and its API under
    ``/playground``, on an app made by
    :func:`~graphroute.core.apps.serve.server.create_app` (whose token check, query pool and
    route and group checks it reuses)."""
    from fastapi import APIRouter
    from fastapi.responses import FileResponse
    from fastapi.staticfiles import StaticFiles

    gr: GraphRoute = app.state.engine
    default_route: str = app.state.config.default_route
    run_limited: RunLimited = app.state.run_limited
    names: SourceNames = app.state.source_names
    known_group: Callable[[str], None] = app.state.known_group
    route_file: Callable[[str], Path] = app.state.route_file
    router = APIRouter(prefix="/playground", tags=["playground"], dependencies=list(app.state.auth))

    def group_of(group: str | None) -> str:
        g = group or gr.group
        known_group(g)
        return g

    @router.get("/info", response_model=InfoResponse, responses=_error_responses(401, 503))
    async def info() -> InfoResponse:
        """The store's groups and the server's default group and route."""
        groups = sorted(await run_limited(gr.store.groups))
        first = groups[:MAX_PAGE_LIMIT]  # the page's group picker; a bounded list whatever the store holds
        if gr.group in groups[MAX_PAGE_LIMIT:]:
            first.append(gr.group)
        return InfoResponse(groups=first, group=gr.group, route=default_route)

    @router.get("/routes/{name}", response_model=RouteView, responses=_error_responses(400, 401, 404, 503))
    async def route_stages(name: str) -> RouteView:
        """The resolved route as the page edits it: stages in run order, each with its
        parameters' values and types (from the stage's Params model)."""
        try:
            route_file(name)
        except RouteConfigError as exc:
            raise ApiError(404, "unknown_route", exc.render()) from None
        resolved = await run_limited(lambda: gr.route(name))
        return route_view(resolved)

    @router.post("/resolve", response_model=ResolveResponse, responses=_error_responses(400, 401, 404, 413, 503))
    async def resolve(body: ResolveRequest) -> ResolveResponse:
        """Validate a configuration (every error with the CLI's message); when it is valid,
        what it changes, the route file that reproduces it and the equivalent command."""
        route = body.config.route
        route_file(route)

        def work() -> ResolveResponse:
            errors = validate(route, body.config, gr.registry)
            if errors:
                return ResolveResponse(ok=False, errors=errors)
            base, current = gr.route(route), gr.route(route, body.config.overrides())
            changed = changes(base, current)
            return ResolveResponse(
                ok=True, errors=[], changed=changed, yaml=export_yaml(base, current, changed),
                command=export_command(route, current, changed, body.question, body.group),
            )

        return await run_limited(work)

    @router.post("/import", response_model=ImportResponse, responses=_error_responses(400, 401, 404, 413, 503))
    async def import_route(body: ImportRequest) -> ImportResponse:
        """Read a route file written by `Copy as YAML` (or by hand: `extends` plus stages
        switched or given parameters) back into a configuration."""
        return await run_limited(lambda: import_config(body.yaml, gr.registry, route_file))

    @router.post("/query", response_model=RunResponse, responses=_error_responses(400, 401, 404, 413, 503, 504))
    async def query(body: RunRequest) -> RunResponse:
        """Answer a question with one configuration: `POST /query`'s result, the resolved
        parameters, and the graph neighbourhood the route used."""
        route_file(body.config.route)
        return await run_limited(lambda: run_one(gr, body.question, group_of(body.group), body.config, names))

    @router.post("/ab", response_model=ABResponse, responses=_error_responses(400, 401, 404, 413, 503, 504))
    async def ab(body: ABRequest) -> ABResponse:
        """The same question through configurations A and B, and what B changes."""
        route_file(body.a.route)
        route_file(body.b.route)

        def work() -> ABResponse:
            group = group_of(body.group)
            a = run_one(gr, body.question, group, body.a, names)
            b = run_one(gr, body.question, group, body.b, names)
            return ABResponse(a=a, b=b, diff=diff_runs(a, b))

        return await run_limited(work)

    @router.post("/ab/questions", response_model=QuestionSetResponse, responses=_error_responses(400, 401, 404, 413, 503, 504))
    async def ab_questions(body: QuestionSetRequest) -> QuestionSetResponse:
        """Score A and B on a small question set (up to 50) with `graphroute ab`'s metrics."""
        route_file(body.a.route)
        route_file(body.b.route)
        return await run_limited(lambda: run_question_set(gr, group_of(body.group), body, names))

    # like POST /query: a place in the query queue is taken (or refused) before the body is read
    app.state.query_queue.endpoints.update({resolve, import_route, query, ab, ab_questions})
    app.include_router(router)
    app.mount("/playground/static", StaticFiles(directory=STATIC_DIR), name="playground-static")

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
        })
