"""Route config: loading, extends, validation errors (each with file, line, stage and fix),
and the one override semantics shared by CLI, environment and API."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from graphroute.core.config.overrides import (
    apply_overrides,
    overrides_from_cli,
    overrides_from_env,
    overrides_from_mapping,
)
from graphroute.core.config.resolve import idle_overrides, load_route, resolve_route
from graphroute.core.config.route import load_route_file
from graphroute.core.errors import RouteConfigError
from graphroute.core.registry import Registry, build_registry

from tests.engine import stages as test_stages


@pytest.fixture(scope="module")
def registry() -> Registry:
    return build_registry(extra_plugins=[test_stages])


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return p


GOOD = """
name: good
description: fixed evidence, keep top, echo
stages:
  - use: t_fixed
    id: fixed
    with: {n: 5}
  - use: t_keep
    id: keep
    with: {n: 3}
  - use: t_echo
    id: synth
"""


def test_good_route_resolves_with_defaults_filled(tmp_path: Path, registry: Registry) -> None:
    route = load_route(str(write(tmp_path, "good", GOOD)), registry, environ={})
    specs = {s.spec.key: s.spec for s in route.stages()}
    assert list(specs) == ["fixed", "keep", "synth"]
    # defaults of the Params model are filled into the resolved config
    assert specs["fixed"].with_ == {"n": 5, "prefix": "e", "start": 1.0}
    assert specs["keep"].with_ == {"n": 3, "threshold": 0.0}


def test_resolved_yaml_round_trips(tmp_path: Path, registry: Registry) -> None:
    route = load_route(str(write(tmp_path, "good", GOOD)), registry, environ={})
    again = load_route(str(write(tmp_path, "again", route.to_yaml())), registry, environ={})
    assert again.to_yaml().replace("name: again", "name: good") == route.to_yaml()


def test_unknown_stage_names_file_line_stage_and_fix(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "bad", GOOD.replace("use: t_keep", "use: t_kep"))
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    e = exc.value
    assert e.file == str(p) and e.line == 7 and e.stage == "keep"
    assert "unknown stage `t_kep`" in e.message
    assert "t_keep" in (e.fix or "")  # a close-match suggestion


def test_unknown_parameter(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "bad", GOOD.replace("with: {n: 3}", "with: {n: 3, treshold: 0.5}"))
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert "unknown parameter `treshold`" in exc.value.message
    assert exc.value.stage == "keep" and exc.value.line == 7
    assert "threshold" in (exc.value.fix or "")  # lists the real parameters


def test_parameter_of_wrong_type_or_range(tmp_path: Path, registry: Registry) -> None:
    for bad in ("with: {n: many}", "with: {n: 0}", "with: {threshold: 3}"):
        p = write(tmp_path, "bad", GOOD.replace("with: {n: 3}", bad))
        with pytest.raises(RouteConfigError) as exc:
            load_route(str(p), registry, environ={})
        assert "bad value" in exc.value.message and exc.value.stage == "keep"


def test_denoiser_before_any_evidence_is_a_wrong_order(tmp_path: Path, registry: Registry) -> None:
    p = write(
        tmp_path,
        "order",
        """
        name: order
        stages:
          - use: t_keep
          - use: t_fixed
          - use: t_echo
        """,
    )
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    e = exc.value
    assert e.stage == "t_keep" and e.line == 3
    assert "needs `evidence`" in e.message
    assert "after a stage that produces `evidence`, e.g." in (e.fix or "")  # names producers


def test_stage_after_the_synthesizer_is_rejected(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "late", GOOD + "  - use: t_keep\n    id: late_keep\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert exc.value.stage == "late_keep" and "after the synthesizer" in exc.value.message


def test_disabling_the_only_producer_names_it(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "good", GOOD)
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, overrides=overrides_from_cli(disable=["fixed"]), environ={})
    assert exc.value.stage == "keep" and "enable 'fixed'" in (exc.value.fix or "")


def test_disabling_a_denoiser_keeps_the_route_valid(tmp_path: Path, registry: Registry) -> None:
    route = load_route(str(write(tmp_path, "good", GOOD)), registry, overrides=overrides_from_cli(disable=["keep"]), environ={})
    assert [s.spec.enabled for s in route.stages()] == [True, False, True]
    assert route.toggleable() == ["keep"]


def test_extends_cycle(tmp_path: Path, registry: Registry) -> None:
    write(tmp_path, "a", "name: a\nextends: b\nstages: []\n")
    write(tmp_path, "b", "name: b\nextends: a\nstages: []\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(tmp_path / "a.yaml"), registry, environ={})
    assert "`extends` cycle: a -> b -> a" in exc.value.message


def user_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stem: str, text: str) -> None:
    """``text`` as ``stem.yaml`` in a folder of user routes on GRAPHROUTE_ROUTES."""
    folder = tmp_path / "mine"
    folder.mkdir()
    write(folder, stem, text)
    monkeypatch.setenv("GRAPHROUTE_ROUTES", str(folder))


def test_a_user_route_extends_the_shipped_route_it_shadows(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_route(tmp_path, monkeypatch, "route2_local",
               "name: route2_local\nextends: route2_local\nstages:\n  - id: chunk_vector\n    with: {top_k: 20}\n")
    route = load_route("route2_local", registry, environ={})  # the user's file, on the shipped one
    assert next(s.params.top_k for s in route.stages() if s.spec.key == "chunk_vector") == 20
    assert {"ppr", "negative_detection"} <= {s.spec.key for s in route.stages()}


def test_a_user_route_is_found_by_its_file_name_and_by_the_name_it_gives_itself(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_route(tmp_path, monkeypatch, "my_route",
               "name: route2_local_custom\nextends: route2_local\nstages:\n  - id: bm25\n    enabled: false\n")
    by_file, by_name = load_route("my_route", registry, environ={}), load_route("route2_local_custom", registry, environ={})
    assert by_file.name == by_name.name == "route2_local_custom"  # the name its results carry
    assert by_file.to_yaml() == by_name.to_yaml()
    with pytest.raises(RouteConfigError, match="unknown route 'route2_local_custm'"):
        load_route("route2_local_custm", registry, environ={})


def test_extends_patches_by_id_and_inserts(tmp_path: Path, registry: Registry) -> None:
    write(tmp_path, "base", GOOD)
    child = write(
        tmp_path,
        "child",
        """
        name: child
        extends: base
        stages:
          - id: keep
            with: {threshold: 0.5}
          - use: t_fixed
            id: more
            after: fixed
            with: {prefix: m, n: 2}
          - id: synth
            enabled: false
        """,
    )
    cfg = load_route_file(str(child))
    assert cfg.stage_ids() == ["fixed", "more", "keep", "synth"]
    keep = next(s for s in cfg.iter_stages() if s.key == "keep")
    assert keep.use == "t_keep" and keep.with_ == {"n": 3, "threshold": 0.5}  # merged, not replaced
    synth = next(s for s in cfg.iter_stages() if s.key == "synth")
    assert synth.enabled is False and synth.use == "t_echo"


def test_a_patch_of_a_stage_the_parent_lacks_names_the_parents_stages(tmp_path: Path, registry: Registry) -> None:
    write(tmp_path, "base", GOOD)
    child = write(tmp_path, "child", "name: child\nextends: base\nstages:\n  - id: kep\n    enabled: false\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(child), registry, environ={})
    assert exc.value.message == "'kep' patches no stage of the parent route 'good'" and exc.value.line == 4
    assert "did you mean keep?" in exc.value.fix and "fixed, keep, synth" in exc.value.fix and "`use:`" in exc.value.fix


def test_malformed_yaml_reports_the_line(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "broken", "name: broken\nstages:\n  - use: t_fixed\n    with: {n: 5\n  - use: t_echo\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert exc.value.message.startswith("malformed YAML") and exc.value.line is not None


def test_unknown_key_in_stage_entry(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "bad", GOOD.replace("    id: keep\n", "    id: keep\n    enabeld: false\n"))
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert "unknown key `enabeld`" in exc.value.message and exc.value.stage == "keep"


def test_duplicate_ids(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "dup", GOOD.replace("id: keep", "id: fixed"))
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert "duplicate stage id 'fixed'" in exc.value.message


def test_override_of_missing_stage_id_is_an_error_but_env_is_not(tmp_path: Path, registry: Registry) -> None:
    p = str(write(tmp_path, "good", GOOD))
    with pytest.raises(RouteConfigError) as exc:
        load_route(p, registry, overrides=overrides_from_cli(sets=["kep.n=2"]), environ={})
    assert "does not have" in exc.value.message and "did you mean 'keep'" in (exc.value.fix or "")
    with pytest.raises(RouteConfigError):
        load_route(p, registry, overrides=overrides_from_mapping({"nope": {"enabled": False}}), environ={})
    # the environment applies to every route, so unknown ids there are ignored
    load_route(p, registry, environ={"GRAPHROUTE__NOPE__N": "2"})


def test_bad_set_syntax() -> None:
    with pytest.raises(RouteConfigError):
        overrides_from_cli(sets=["keep=2"])


def test_override_precedence_yaml_env_then_explicit(tmp_path: Path, registry: Registry) -> None:
    p = str(write(tmp_path, "good", GOOD))

    def keep_n(route) -> int:  # type: ignore[no-untyped-def]
        return next(s.params.n for s in route.stages() if s.spec.key == "keep")

    assert keep_n(load_route(p, registry, environ={})) == 3  # YAML
    env = {"GRAPHROUTE__KEEP__N": "4"}
    assert keep_n(load_route(p, registry, environ=env)) == 4  # env beats YAML
    cli = overrides_from_cli(sets=["keep.n=2"])
    assert keep_n(load_route(p, registry, overrides=cli, environ=env)) == 2  # CLI beats env
    api = overrides_from_mapping({"keep": {"n": 1}})
    assert keep_n(load_route(p, registry, overrides=api, environ=env)) == 1  # API beats env
    # toggles follow the same order
    off = load_route(p, registry, environ={"GRAPHROUTE__KEEP__ENABLED": "0"})
    assert [s.spec.enabled for s in off.stages()][1] is False
    back_on = load_route(p, registry, overrides=overrides_from_cli(enable=["keep"]), environ={"GRAPHROUTE__KEEP__ENABLED": "0"})
    assert [s.spec.enabled for s in back_on.stages()][1] is True


def test_override_values_are_typed_and_validated(tmp_path: Path, registry: Registry) -> None:
    p = str(write(tmp_path, "good", GOOD))
    route = load_route(p, registry, overrides=overrides_from_cli(sets=["keep.threshold=0.25"]), environ={})
    assert next(s.params.threshold for s in route.stages() if s.spec.key == "keep") == 0.25
    with pytest.raises(RouteConfigError) as exc:
        load_route(p, registry, overrides=overrides_from_cli(sets=["keep.threshold=high"]), environ={})
    assert exc.value.stage == "keep"
    # the bad value is the override's: the message says where it came from (file and line
    # stay those of the stage it overrides)
    assert exc.value.message.endswith("set by the command line (not in the route's file)")
    assert exc.value.file == p and exc.value.line is not None
    with pytest.raises(RouteConfigError) as exc:
        load_route(p, registry, overrides=overrides_from_cli(sets=["keep.n=2"]),
                   environ={"GRAPHROUTE__KEEP__THRESHOLD": "high"})
    assert "set by the environment" in exc.value.message
    # a parameter the file itself gets wrong is the file's
    bad = write(tmp_path, "bad", GOOD.replace("n: 3", "n: many"))
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(bad), registry, environ={})
    assert exc.value.file == str(bad) and "set by" not in exc.value.message
    for item in ("keep.=1", ".n=1"):
        with pytest.raises(RouteConfigError, match="no stage id or no parameter"):
            overrides_from_cli(sets=[item])
    with pytest.raises(RouteConfigError, match="bad override key"):
        overrides_from_mapping({"keep.": 1})


def test_api_override_forms_are_equivalent(tmp_path: Path, registry: Registry) -> None:
    cfg = load_route_file(str(write(tmp_path, "good", GOOD)))
    a = apply_overrides(cfg, overrides_from_mapping({"keep.n": 2, "keep.enabled": False}))
    b = apply_overrides(cfg, overrides_from_mapping({"keep": {"n": 2, "enabled": False}}))
    assert a.to_yaml() == b.to_yaml()
    assert resolve_route(a, registry).to_yaml() == resolve_route(b, registry).to_yaml()


def test_env_override_parsing() -> None:
    ov = overrides_from_env({"GRAPHROUTE__SCORE_GAP__THRESHOLD": "0.4", "GRAPHROUTE__SCORE_GAP__ENABLED": "false", "GRAPHROUTE_STORE": "x"})
    assert ov.params == {("score_gap", "threshold"): 0.4}
    assert ov.enabled == {"score_gap": False}


def test_parallel_branches_are_validated_each(tmp_path: Path, registry: Registry) -> None:
    p = write(
        tmp_path,
        "par",
        """
        name: par
        stages:
          - parallel:
              - [{use: t_fixed, id: a, with: {prefix: a}}]
              - [{use: t_keep, id: k}]
          - use: t_echo
        """,
    )
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert exc.value.stage == "k"


def test_shipped_routes_all_resolve() -> None:
    """Every YAML shipped in routes/ loads and validates against the built-in plugins."""
    from graphroute.core.config.route import builtin_routes_dir
    from graphroute.core.registry import get_registry

    names = sorted(p.stem for p in builtin_routes_dir().glob("*.yaml"))
    for name in names:
        route = load_route(name, get_registry(), environ={})
        assert yaml.safe_load(route.to_yaml())["name"] == name


IDLE_BLOCK = """
name: idle
stages:
  - use: t_fixed
    id: fixed
  - id: spare
    enabled: false
    parallel:
      - - {use: t_fixed, id: spare_fixed}
        - {use: t_keep, id: spare_keep, enabled: false}
  - use: t_keep
    id: keep
  - use: t_echo
    id: synth
"""


def test_an_override_of_a_stage_in_a_disabled_block_says_which_flags_would_count(tmp_path: Path, registry: Registry) -> None:
    p = str(write(tmp_path, "idle", IDLE_BLOCK))
    before = load_route(p, registry, environ={})
    assert before.disabled_block("spare_fixed") == before.disabled_block("spare_keep") == "spare"
    assert before.disabled_block("keep") is None and before.disabled_block("spare") is None
    ov = overrides_from_cli(sets=["spare_fixed.n=2", "spare_keep.n=2", "keep.n=3"], enable=["keep"])
    after = load_route(p, registry, overrides=ov, environ={})
    assert idle_overrides(before, after, ov) == [
        "spare_fixed is in the parallel block spare, disabled in idle: --set spare_fixed.n=2 changes nothing; "
        "add --enable spare",
        # the stage is off inside a block that is off: enabling the stage alone would not do
        "spare_keep is disabled in idle, and so is its parallel block spare: --set spare_keep.n=2 changes nothing; "
        "add --enable spare_keep --enable spare",
        "keep.n is already 3 in idle: --set keep.n=3 changes nothing",
        "keep is already enabled in idle: --enable keep changes nothing",
    ]
    ov = overrides_from_cli(enable=["spare_keep"])
    after = load_route(p, registry, overrides=ov, environ={})
    assert idle_overrides(before, after, ov, prefix="--b-") == [
        "spare_keep is in the parallel block spare, disabled in idle: --b-enable spare_keep changes nothing; "
        "add --b-enable spare",
    ]


def test_a_patch_that_swaps_the_stage_keeps_its_id(tmp_path: Path, registry: Registry) -> None:
    # `keep` was written without an id (its id is its `use`); another stage in its place must
    # still answer to that id in overrides, toggles and the trace
    write(tmp_path, "base", GOOD.replace("  - use: t_keep\n    id: keep\n", "  - use: t_keep\n"))
    child = write(tmp_path, "child", "name: child\nextends: base\nstages:\n  - id: t_keep\n    use: t_fixed\n")
    cfg = load_route_file(str(child))
    assert cfg.stage_ids() == ["fixed", "t_keep", "synth"]
    swapped = next(s for s in cfg.iter_stages() if s.key == "t_keep")
    assert swapped.use == "t_fixed" and swapped.with_ == {}
    route = load_route(str(child), registry, overrides=overrides_from_cli(disable=["t_keep"]), environ={})
    assert [s.spec.enabled for s in route.stages()] == [True, False, True]


def test_a_patch_with_after_moves_the_stage(tmp_path: Path, registry: Registry) -> None:
    write(tmp_path, "base", GOOD.replace("  - use: t_echo\n    id: synth\n", "  - use: t_keep\n    id: keep2\n  - use: t_echo\n    id: synth\n"))
    child = write(tmp_path, "child", "name: child\nextends: base\nstages:\n  - id: keep\n    after: keep2\n    with: {n: 1}\n")
    cfg = load_route_file(str(child))
    assert cfg.stage_ids() == ["fixed", "keep2", "keep", "synth"]
    assert next(s for s in cfg.iter_stages() if s.key == "keep").with_ == {"n": 1}
    bad = write(tmp_path, "bad", "name: bad\nextends: base\nstages:\n  - id: keep\n    before: nowhere\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route_file(str(bad))
    assert "`before: nowhere` names no top-level stage" in exc.value.message and exc.value.line == 4


def test_two_parallel_blocks_without_an_id_are_a_duplicate(tmp_path: Path, registry: Registry) -> None:
    block = "  - parallel:\n      - [{use: t_keep, id: K}]\n"
    p = write(tmp_path, "pb", GOOD.replace("  - use: t_echo\n", block.replace("K", "k1") + block.replace("K", "k2") + "  - use: t_echo\n"))
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert exc.value.message == "duplicate parallel block id 'parallel' (also at line 10)" and exc.value.line == 12
    assert "its own `id:`" in (exc.value.fix or "")


def test_an_unknown_parent_is_reported_at_the_extends_line(tmp_path: Path, registry: Registry) -> None:
    child = write(tmp_path, "child", "name: child\n# a parent that is not there\nextends: nowhere_route\nstages: []\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(child), registry, environ={})
    assert "nowhere_route" in exc.value.message and exc.value.line == 3 and exc.value.file == str(child)


def test_a_missing_required_parameter_is_named_as_such(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "req", "name: req\nstages:\n  - use: t_required\n  - use: t_echo\n")
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, environ={})
    assert exc.value.message == "missing required parameter `limit` for stage `t_required`"
    assert "limit (int, required)" in (exc.value.fix or "") and "Undefined" not in (exc.value.fix or "")


def test_disabling_a_block_names_the_block_as_the_fix(tmp_path: Path, registry: Registry) -> None:
    p = write(tmp_path, "blk", """
        name: blk
        stages:
          - id: retrieve
            parallel:
              - [{use: t_fixed, id: a}]
              - [{use: t_fixed, id: b, enabled: false}]
          - use: t_keep
            id: keep
          - use: t_echo
        """)
    with pytest.raises(RouteConfigError) as exc:
        load_route(str(p), registry, overrides=overrides_from_cli(disable=["retrieve"]), environ={})
    assert exc.value.stage == "keep" and "enable 'retrieve'" in (exc.value.fix or "")


def test_a_name_two_route_files_declare_is_ambiguous(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    for stem in ("first", "second"):
        write(folder, stem, GOOD.replace("name: good", "name: shared"))
    monkeypatch.setenv("GRAPHROUTE_ROUTES", str(folder))
    with pytest.raises(RouteConfigError) as exc:
        load_route("shared", registry, environ={})
    assert "route name 'shared' is declared by 2 files" in exc.value.message
    assert load_route("first", registry, environ={}).name == "shared"  # by its file name: no doubt
