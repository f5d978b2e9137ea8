"""Overrides: ``--set``/``--disable``/``--enable``, ``GRAPHROUTE__ID__PARAM`` and the API mapping, applied to a route config."""

from __future__ import annotations

import difflib
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from graphroute.core.api.values import MAX_NAME_CHARS, MAX_VALUE_DEPTH, echo, parse_bool, too_deep
from graphroute.core.config.route import (
    ParallelSpec,
    RouteConfig,
    StageSpec,
    list_routes,
    load_route_file,
)
from graphroute.core.config.yaml_lines import BoundedLoader
from graphroute.core.errors import RouteConfigError

# --------------------------------------------------------------------------- overrides


ENV_PREFIX = "GRAPHROUTE__"  # GRAPHROUTE__<STAGE_ID>__<PARAM>=value


@dataclass
class Overrides:
    """Parameter values and toggles by stage id, from one source (env, CLI or API)."""

    params: dict[tuple[str, str], Any] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=dict)
    origin: str = "override"
    strict: bool = True  # unknown stage ids are an error (not for the environment)
    # where each parameter's value came from, when merged from several sources (else ``origin``)
    sources: dict[tuple[str, str], str] = field(default_factory=dict)

    def merged(self, other: Overrides) -> Overrides:
        """``other`` wins."""
        return Overrides(
            {**self.params, **other.params}, {**self.enabled, **other.enabled}, other.origin, other.strict,
            {**{k: self.source_of(k) for k in self.params}, **{k: other.source_of(k) for k in other.params}},
        )

    def source_of(self, key: tuple[str, str]) -> str:
        """Where the value of ``key`` (stage id, parameter) came from: "command line", ..."""
        return self.sources.get(key, self.origin)

    def is_empty(self) -> bool:
        return not self.params and not self.enabled


def parse_value(text: str, what: str = "value") -> Any:
    """``0.4`` -> float, ``true`` -> bool, ``[a, b]`` -> list, anything else -> str. YAML
    aliases and nesting deeper than MAX_VALUE_DEPTH are refused (RouteConfigError naming
    ``what``): a value never expands beyond what was written."""
    try:
        return yaml.load(text, Loader=BoundedLoader)
    except RouteConfigError as exc:
        raise RouteConfigError(f"{what}: {exc.message}", fix=exc.fix) from None
    except yaml.YAMLError:
        return text


def _value(value: Any, stage_id: str, param: str, origin: str) -> Any:
    """An override's value when it nests at most MAX_VALUE_DEPTH levels deep."""
    if too_deep(value):
        raise RouteConfigError(
            f"{origin}: the value of {stage_id}.{param} nests more than {MAX_VALUE_DEPTH} levels deep",
            stage=stage_id, fix="a stage's parameters are a few levels deep; write the value flatter",
        )
    return value


def _name(name: str, what: str, origin: str) -> str:
    """``name`` (a stage id or a parameter name) when it is short enough to be one; a
    RouteConfigError otherwise, so no message repeats a request's megabyte-long key."""
    if len(name) > MAX_NAME_CHARS:
        raise RouteConfigError(
            f"{origin}: {what} {echo(name, quote=True)} is longer than {MAX_NAME_CHARS} characters",
            fix="name a stage of the route by its id (`graphroute routes show ROUTE`) and one of its parameters",
        )
    return name


def _names(key: str, origin: str) -> tuple[str, str]:
    """``STAGE_ID.PARAM`` split in two, each checked by :func:`_name`."""
    stage_id, param = key.split(".", 1)
    return _name(stage_id, "stage id", origin), _name(param, "parameter name", origin)


def overrides_from_cli(
    sets: Iterable[str] = (), disable: Iterable[str] = (), enable: Iterable[str] = ()
) -> Overrides:
    ov = Overrides(origin="command line")
    for item in sets:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise RouteConfigError(
                f"bad --set {echo(item, quote=True)}", fix="write --set STAGE_ID.PARAM=VALUE, e.g. --set score_gap.threshold=0.4"
            )
        key, value = item.split("=", 1)
        stage_id, param = _names(key, "--set")
        if not stage_id or not param:
            raise RouteConfigError(
                f"bad --set {echo(item, quote=True)}: no stage id or no parameter",
                fix="write --set STAGE_ID.PARAM=VALUE, e.g. --set score_gap.threshold=0.4",
            )
        if param == "enabled":
            ov.enabled[stage_id] = parse_bool(value, f"--set {key}")
        else:
            ov.params[(stage_id, param)] = parse_value(value, f"--set {key}")
    for s in disable:
        ov.enabled[_name(s, "stage id", "--disable")] = False
    for s in enable:
        ov.enabled[_name(s, "stage id", "--enable")] = True
    return ov


def overrides_from_env(environ: Mapping[str, str] | None = None) -> Overrides:
    """``GRAPHROUTE__SCORE_GAP__THRESHOLD=0.4`` and ``GRAPHROUTE__SCORE_GAP__ENABLED=0``.
    Ids are matched case-insensitively; ids not in the route are ignored (the environment
    applies to every route), with a warning when no installed route has that id."""
    ov = Overrides(origin="environment", strict=False)
    for name, value in (environ if environ is not None else os.environ).items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].split("__")
        if len(parts) != 2 or not all(parts):
            continue
        stage_id, param = parts[0].lower(), parts[1].lower()
        if param == "enabled":
            ov.enabled[stage_id] = parse_bool(value, name)
        else:
            ov.params[(stage_id, param)] = parse_value(value, name)
    return ov


def overrides_from_mapping(mapping: Mapping[str, Any] | None) -> Overrides:
    """API form: ``{"score_gap.threshold": 0.4, "score_gap.enabled": False}`` or nested
    ``{"score_gap": {"threshold": 0.4, "enabled": False}}``."""
    ov = Overrides(origin="API overrides")
    for key, value in (mapping or {}).items():
        if isinstance(value, Mapping):
            _name(key, "stage id", ov.origin)
            for param, v in value.items():
                _name(str(param), "parameter name", ov.origin)
                if param == "enabled":
                    ov.enabled[key] = parse_bool(v, f"override {key}.enabled")
                else:
                    ov.params[(key, param)] = _value(v, key, param, ov.origin)
        elif "." in key and all(key.split(".", 1)):
            stage_id, param = _names(key, ov.origin)
            if param == "enabled":
                ov.enabled[stage_id] = parse_bool(value, f"override {key}")
            else:
                ov.params[(stage_id, param)] = _value(value, stage_id, param, ov.origin)
        else:
            raise RouteConfigError(
                f"bad override key {echo(key, quote=True)}", fix='use "STAGE_ID.PARAM" or {"STAGE_ID": {"PARAM": value}}'
            )
    return ov


def apply_overrides(cfg: RouteConfig, ov: Overrides) -> RouteConfig:
    cfg = cfg.model_copy(deep=True)
    by_id: dict[str, StageSpec | ParallelSpec] = {s.key: s for s in cfg.iter_stages()}
    for e in cfg.stages:
        if isinstance(e, ParallelSpec):
            by_id.setdefault(e.key, e)
    lower = {k.lower(): k for k in by_id}

    ignored: list[str] = []

    def target(stage_id: str) -> StageSpec | ParallelSpec | None:
        key = stage_id if stage_id in by_id else lower.get(stage_id.lower()) if not ov.strict else None
        if key is None:
            ignored.append(stage_id)
            if ov.strict:
                close = difflib.get_close_matches(stage_id, list(by_id), n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise RouteConfigError(
                    f"stage id '{stage_id}' (from the {ov.origin}) is one route '{cfg.name}' does not have",
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
        t.overridden[param] = ov.source_of((stage_id, param))
    for stage_id, on in ov.enabled.items():
        t = target(stage_id)
        if t is not None:
            t.enabled = on
    if ignored:
        warn_unknown_stage_ids(ignored, ov.origin)
    return cfg


_logger = logging.getLogger("graphroute.config")
_checked_ids: set[str] = set()
_checked_lock = threading.Lock()


def warn_unknown_stage_ids(stage_ids: Iterable[str], origin: str) -> list[str]:
    """Warn (once per id and process) about override ids that no installed route has: a
    typo in ``GRAPHROUTE__ID__PARAM`` would otherwise be ignored without a word. Returns
    the ids warned about now."""
    with _checked_lock:
        fresh = [s for s in dict.fromkeys(i.lower() for i in stage_ids) if s not in _checked_ids]
        _checked_ids.update(fresh)
    if not fresh:
        return []
    known = known_stage_ids()
    warned = []
    for stage_id in fresh:
        if stage_id in known:
            continue
        close = difflib.get_close_matches(stage_id, sorted(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        _logger.warning("%s names stage id '%s', which no installed route has; ignored%s", origin, stage_id, hint)
        warned.append(stage_id)
    return warned


def known_stage_ids() -> set[str]:
    """Stage ids (lower case) of every route ``list_routes`` finds; a route that does not
    load contributes none."""
    ids: set[str] = set()
    for path in list_routes().values():
        try:
            cfg = load_route_file(str(path))
        except Exception:  # a broken user route is reported when it is used, not here
            continue
        ids.update(s.key.lower() for s in cfg.iter_stages())
        ids.update(e.key.lower() for e in cfg.stages if isinstance(e, ParallelSpec))
    return ids
