"""Resolve a route config against the registry: every stage exists, its parameters validate, its inputs are produced earlier."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphroute.core.api.stage import Slot, Stage, StageKind
from graphroute.core.config.clients import param_problem
from graphroute.core.config.overrides import Overrides, apply_overrides, overrides_from_env
from graphroute.core.config.route import (
    ParallelSpec,
    RouteConfig,
    StageSpec,
    check_unique_ids,
    load_route_file,
)
from graphroute.core.errors import PluginError, RouteConfigError
from graphroute.core.registry import Registry
from pydantic import ValidationError

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

    def effective(self) -> list[Any]:
        """What running the route does, as plain data: its enabled entries in order, a stage
        as (id, plugin, validated parameters with defaults filled in), a parallel block as
        (id, merge, rrf_k, branches). Disabled stages and blocks run nothing, so they and
        their parameters are left out: two routes with equal ``effective()`` answer every
        question alike, whatever their names or the parameters of their idle stages."""

        def stage(s: ResolvedStage) -> list[Any]:
            return [s.spec.key, s.cls.name, s.params.model_dump(mode="json")]

        out: list[Any] = []
        for e in self.entries:
            if not e.spec.enabled:
                continue
            if isinstance(e, ResolvedParallel):
                branches = [[stage(s) for s in b if s.spec.enabled] for b in e.branches]
                out.append([e.spec.key, e.spec.merge, e.spec.rrf_k, branches])
            else:
                out.append(stage(e))
        return out

    def switches(self) -> dict[str, bool]:
        """Every id a ``--disable``/``--enable`` can name, in route order (a parallel block
        before its stages), and whether it is on."""
        out: dict[str, bool] = {}
        for e in self.entries:
            if isinstance(e, ResolvedParallel):
                out[e.spec.key] = e.spec.enabled
                out.update((s.spec.key, s.spec.enabled) for b in e.branches for s in b)
            else:
                out[e.spec.key] = e.spec.enabled
        return out

    def toggleable(self) -> list[str]:
        """Ids of stages that can be switched off without breaking the route (ablation)."""
        return [s.spec.key for s in self.stages() if s.cls.kind == StageKind.DENOISER]

    def disabled_block(self, sid: str) -> str | None:
        """The id of the disabled parallel block that holds stage ``sid``, whose stages run
        nothing whatever their own state and parameters; None when ``sid`` is in none. Why
        an override of ``sid`` (:func:`idle_overrides`) or switching it on (the bench's
        ablation) changes nothing."""
        for e in self.entries:
            if isinstance(e, ResolvedParallel) and not e.spec.enabled and any(s.spec.key == sid for b in e.branches for s in b):
                return e.spec.key
        return None


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
        fields = ", ".join(
            f"{k} ({_type_name(f.annotation)}, {'required' if f.is_required() else f'default {f.default!r}'})"
            for k, f in cls.Params.model_fields.items())
        msg = param_problem(exc, "stage", spec.use)
        origin = spec.overridden.get(str(err["loc"][0])) if err["loc"] else None
        if origin is not None:  # the value is the override's; file and line say where the stage is
            msg += f", set by the {origin} (not in the route's file)"
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


def _disabled_producers(entries: Sequence[ResolvedEntry]) -> dict[Slot, str]:
    """For each slot, the first switched-off entry whose enabling would produce it: a disabled
    parallel block (by the enabled stages of its branches) or a disabled stage."""
    out: dict[Slot, str] = {}
    for e in entries:
        if isinstance(e, ResolvedParallel):
            inner = [rs for b in e.branches for rs in b]
            if not e.spec.enabled:
                for rs in inner:
                    if rs.spec.enabled:
                        for slot in rs.cls.produces:
                            out.setdefault(slot, e.spec.key)
            for slot, key in _disabled_producers(inner).items():
                out.setdefault(slot, key)
        elif not e.spec.enabled:
            for slot in e.cls.produces:
                out.setdefault(slot, e.spec.key)
    return out


def _check_slot_params(entries: Sequence[ResolvedEntry], cfg: RouteConfig, made: dict[Slot, str]) -> dict[Slot, str]:
    """Refuse a parameter that would replace a slot an earlier enabled stage produces
    (``Stage.slot_params``): two sources of one value, one of them silently ignored."""
    made = dict(made)
    for entry in entries:
        if isinstance(entry, ResolvedParallel):
            if entry.spec.enabled:
                out = dict(made)
                for branch in entry.branches:
                    out.update(_check_slot_params(branch, cfg, made))
                made = out
            continue
        if not entry.spec.enabled:
            continue
        for param, slot in entry.cls.slot_params.items():
            value = getattr(entry.params, param, None)
            if value is not None and slot in made:
                raise RouteConfigError(
                    f"`{entry.spec.key}.{param}` is {value!r}, but '{made[slot]}' earlier in this route "
                    f"sets `{slot.value}` for every question, and one of the two would be ignored",
                    file=entry.spec.source or cfg.source, line=entry.spec.line, stage=entry.spec.key,
                    fix=f"set `{entry.spec.key}.{param}` to null to use '{made[slot]}''s value, or configure "
                    f"'{made[slot]}' (or disable it) to choose the value there",
                )
        for slot in entry.cls.produces:
            made[slot] = entry.spec.key
    return made


def resolve_route(cfg: RouteConfig, registry: Registry) -> ResolvedRoute:
    """Check every stage and the order; fill in parameter defaults."""
    cfg = cfg.model_copy(deep=True)
    check_unique_ids(cfg)
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
    producers = _disabled_producers(entries)
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
    _check_slot_params(entries, cfg, {})
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


def _flag_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def idle_overrides(before: ResolvedRoute, after: ResolvedRoute, only: Overrides, prefix: str = "--") -> list[str]:
    """What of ``only`` (the overrides that turned ``before`` into ``after``) changes nothing,
    one sentence each with the reason and, where there is one, the flag that would: a
    parameter of a stage that stays disabled (or sits in a disabled parallel block), a
    parameter set to the value it has, a stage switched to the state it is in. ``prefix``
    starts the flags named: ``--`` for ``query``, ``--b-`` for the B side of ``ab``."""

    name = after.name
    stages = {s.spec.key: s for s in after.stages()}
    was = {s.spec.key: s for s in before.stages()}
    was_on = before.switches()
    notes: list[str] = []

    for (sid, param), value in only.params.items():
        flag = f"{prefix}set {sid}.{param}={_flag_value(value)}"
        stage = stages.get(sid)
        if stage is None or sid not in was:
            continue
        block = after.disabled_block(sid)
        if not stage.spec.enabled and block is not None:  # enabling the stage alone would change nothing either
            notes.append(f"{sid} is disabled in {name}, and so is its parallel block {block}: {flag} changes nothing; "
                         f"add {prefix}enable {sid} {prefix}enable {block}")
        elif not stage.spec.enabled:
            notes.append(f"{sid} is disabled in {name}: {flag} changes nothing; add {prefix}enable {sid}")
        elif block is not None:
            notes.append(f"{sid} is in the parallel block {block}, disabled in {name}: {flag} changes nothing; "
                         f"add {prefix}enable {block}")
        elif getattr(was[sid].params, param, None) == getattr(stage.params, param, None):
            notes.append(f"{sid}.{param} is already {_flag_value(value)} in {name}: {flag} changes nothing")
    for sid, on in only.enabled.items():
        flag = f"{prefix}{'enable' if on else 'disable'} {sid}"
        if was_on.get(sid) == on:
            notes.append(f"{sid} is already {'enabled' if on else 'disabled'} in {name}: {flag} changes nothing")
        elif on and (block := after.disabled_block(sid)) is not None:
            notes.append(f"{sid} is in the parallel block {block}, disabled in {name}: {flag} changes nothing; "
                         f"add {prefix}enable {block}")
    return notes
