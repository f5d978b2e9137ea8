"""A value a stage reads has one declared source: a parameter never silently loses to a slot."""

from __future__ import annotations

import pytest
from graphroute.core.api.stage import DampingRule, QueryState, Slot
from graphroute.core.config.overrides import overrides_from_cli
from graphroute.core.config.resolve import load_route
from graphroute.core.errors import RouteConfigError
from graphroute.core.query.runner import merge_states
from graphroute.core.registry import get_registry


def test_a_fixed_ppr_damping_is_refused_where_weight_profile_chooses_it() -> None:
    with pytest.raises(RouteConfigError) as err:
        load_route("route5_unified", get_registry(), overrides=overrides_from_cli(["ppr.damping=0.8"]))
    text = err.value.render()
    assert "ppr.damping" in text and "unified_seeds" in text and "fix:" in text


def test_the_damping_is_fixed_where_it_is_chosen() -> None:
    route = load_route("route5_unified", get_registry(), overrides=overrides_from_cli(["weight_profile.damping=0.8"]))
    assert "damping: 0.8" in route.to_yaml()


def test_without_a_producer_the_ppr_damping_is_the_routes_own() -> None:
    route = load_route("route2_local", get_registry(), overrides=overrides_from_cli(["ppr.damping=0.8"]))
    ppr = next(s for s in route.stages() if s.spec.key == "ppr")
    assert ppr.params.damping == 0.8


def test_declared_slots_cover_damping_and_node_scores() -> None:
    reg = get_registry()
    ppr = reg.stages.get("ppr")
    assert Slot.DAMPING in ppr.reads and Slot.NODE_SCORES in ppr.produces
    assert Slot.DAMPING in reg.stages.get("weight_profile").produces
    assert Slot.NODE_SCORES in reg.stages.get("ppr_passages").consumes


def test_branches_merge_single_valued_slots_from_the_branch_that_produced_them() -> None:
    base = QueryState("q", "g")
    a, b = base.fork(), base.fork()
    b.damping, b.damping_rule, b.node_scores = 0.8, DampingRule(0.7, 0.2, fixed=True), {"c1": 0.5}
    merge_states(base, [a, b], "union")
    assert base.damping == 0.8 and base.damping_rule is not None and base.damping_rule.fixed
    assert base.node_scores == {"c1": 0.5}
    assert base.size(Slot.DAMPING) == 1 and base.size(Slot.NODE_SCORES) == 1
