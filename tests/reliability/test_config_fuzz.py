"""Fuzz the route config loader: whatever the text, the result is a resolved route or a
RouteConfigError with a message - never another exception, never a traceback."""

from __future__ import annotations

from pathlib import Path

import yaml
from graphroute.core.config.overrides import overrides_from_cli, overrides_from_mapping
from graphroute.core.config.resolve import load_route
from graphroute.core.errors import RouteConfigError
from graphroute.core.registry import build_registry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine import stages as test_stages

REGISTRY = build_registry(extra_plugins=[test_stages])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 50), st.floats(-2, 2, allow_nan=False), st.text(max_size=8))
params = st.dictionaries(st.sampled_from(["n", "threshold", "prefix", "start", "bogus"]), scalars, max_size=3)
stage_entries = st.fixed_dictionaries(
    {"use": st.sampled_from(["t_fixed", "t_keep", "t_echo", "t_missing"])},
    optional={"id": st.sampled_from(["a", "b", "c", "a"]), "enabled": st.booleans(), "with": params},
)
routes = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=10), "stages": st.lists(stage_entries, max_size=5)},
    optional={"extends": st.sampled_from(["self_route", "missing_parent"]), "description": st.text(max_size=20)},
)


def _load(tmp: Path, text: str) -> None:
    p = tmp / "self_route.yaml"
    p.write_text(text, encoding="utf-8")
    try:
        load_route(str(p), REGISTRY, environ={})
    except RouteConfigError as exc:
        assert exc.render().strip()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=routes)
def test_structured_routes_validate_or_explain(tmp_path: Path, route: dict) -> None:  # type: ignore[type-arg]
    _load(tmp_path, yaml.safe_dump(route, allow_unicode=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_arbitrary_text_never_crashes(tmp_path: Path, text: str) -> None:
    _load(tmp_path, text)


@settings(max_examples=100, deadline=None)
@given(sets=st.lists(st.text(max_size=20), max_size=3), mapping=st.dictionaries(st.text(max_size=10), scalars, max_size=3))
def test_override_parsing_never_crashes(sets: list[str], mapping: dict) -> None:  # type: ignore[type-arg]
    for build in (lambda: overrides_from_cli(sets=sets), lambda: overrides_from_mapping(mapping)):
        try:
            build()
        except RouteConfigError as exc:
            assert exc.render()
