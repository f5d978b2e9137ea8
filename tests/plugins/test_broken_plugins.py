"""A broken plugin is named, with what failed and how to go on, and `graphroute plugins` still
lists the others: a failing entry-point import, a `register_*` hook returning something other
than a list of its family's classes, a hook name that matches no hook spec.

The broken entry point is a real distribution (a `.dist-info` with `entry_points.txt`) on a
path put on `sys.path` / PYTHONPATH, found by importlib.metadata the way pip-installed plugins
are; the other plugins are modules registered through `extra_plugins` and GRAPHROUTE_PLUGINS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from graphroute.core import PluginError, Slot, Stage, StageKind, StageParams, hookimpl
from graphroute.core.api.components import Loader
from graphroute.core.registry import build_registry
from pydantic import BaseModel, Field

GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")
EP = "broken_probe"
DIST = "graphroute-broken-probe"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([GRAPHROUTE, *args], capture_output=True, text=True, env=full, timeout=120)


@pytest.fixture
def broken_dist(tmp_path: Path) -> Path:
    """A folder holding an installed distribution whose `graphroute` entry point imports an SDK
    that is not installed (what QA did to a `graphroute new-plugin` package)."""
    (tmp_path / "broken_probe_pkg.py").write_text("import not_installed_sdk_xyz\n", encoding="utf-8")
    info = tmp_path / "graphroute_broken_probe-0.3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.3.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[graphroute]\n{EP} = broken_probe_pkg\n", encoding="utf-8")
    return tmp_path


def assert_names_and_fix(message: str) -> None:
    assert f"'{EP}'" in message and f"{DIST} 0.3.1" in message and f"{EP} = broken_probe_pkg" in message
    assert "No module named 'not_installed_sdk_xyz'" in message
    assert f"pip uninstall {DIST}" in message
    assert f"GRAPHROUTE_DISABLE_PLUGINS={EP}" in message and "GRAPHROUTE_DISABLE_ENTRY_POINTS=1" in message


def test_a_broken_entry_point_is_named_with_its_distribution_and_how_to_skip_it(
    broken_dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(broken_dist))
    with pytest.raises(PluginError) as err:
        build_registry()
    assert_names_and_fix(str(err.value))

    # the other plugins still load; the broken one is listed, not fatal, when asked for
    registry = build_registry(keep_broken=True)
    assert registry.stages.entries["min_length"].plugin == "example"
    assert [b.name for b in registry.broken] == [EP]
    row = next(r for r in registry.plugins() if r["name"] == EP)
    assert row["distribution"] == f"{DIST} 0.3.1" and "not_installed_sdk_xyz" in row["error"]

    # skipping just that plugin
    monkeypatch.setenv("GRAPHROUTE_DISABLE_PLUGINS", f"other, {EP}")
    registry = build_registry()
    assert "min_length" in registry.stages and registry.broken == []
    assert registry.disabled == ["other", EP]


def test_cli_names_the_broken_plugin_and_plugins_still_lists_the_others(broken_dist: Path) -> None:
    env = {"PYTHONPATH": str(broken_dist)}
    r = cli("routes", "show", "route1s_sentence", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert_names_and_fix(r.stderr)

    r = cli("plugins", "--json", env=env)
    assert r.returncode == 2, r.stderr  # the listing, then the error
    rows = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}
    assert rows["example"]["contributes"] == {"denoiser": ["min_length"]} and rows["example"]["error"] is None
    assert "not_installed_sdk_xyz" in rows[EP]["error"] and f"GRAPHROUTE_DISABLE_PLUGINS={EP}" in rows[EP]["fix"]
    assert_names_and_fix(r.stderr)

    r = cli("plugins", env=env)
    assert r.returncode == 2
    assert "min_length" in r.stdout and EP in r.stdout and "broken" in r.stdout

    r = cli("plugins", "--json", env={**env, "GRAPHROUTE_DISABLE_PLUGINS": EP})
    assert r.returncode == 0, r.stderr
    listing = json.loads(r.stdout)
    assert listing["disabled"] == [EP] and EP not in {p["name"] for p in listing["plugins"]}


class Bare(Stage):
    """A denoiser returned without its list."""

    name = "bare_probe"
    kind = StageKind.DENOISER

    def run(self, state, ctx):  # type: ignore[no-untyped-def]
        pass


class NotADenoiser(Loader):
    """A loader returned from the denoiser hook."""

    name = "not_a_denoiser"
    extensions = (".probe",)


def plugin_module(name: str, hook: str, result: object) -> types.ModuleType:
    module = types.ModuleType(name)

    def impl() -> object:
        return result

    impl.__name__ = hook
    setattr(module, hook, hookimpl(impl))
    return module


@pytest.mark.parametrize(
    ("result", "shown"),
    [
        (Bare, "<class"),
        (["x"], "['x']"),
        ([NotADenoiser], "NotADenoiser"),
        (None, "None"),
    ],
)
def test_a_register_hook_returning_no_list_of_its_family_names_plugin_and_hook(result: object, shown: str) -> None:
    with pytest.raises(PluginError) as err:
        build_registry(entry_points=False, extra_plugins=[plugin_module("acme_probe", "register_denoisers", result)])
    message = str(err.value)
    assert "'acme_probe'" in message and "register_denoisers" in message and shown in message
    assert "expected a list of Stage subclasses with kind = StageKind.DENOISER" in message


def test_a_register_hook_of_an_index_family_names_its_base_class() -> None:
    with pytest.raises(PluginError, match=r"'acme_probe'.*register_loaders.*expected a list of Loader subclasses"):
        build_registry(entry_points=False, extra_plugins=[plugin_module("acme_probe", "register_loaders", [Bare])])


def test_a_bad_plugin_contributes_nothing_when_kept() -> None:
    good = plugin_module("good_probe", "register_denoisers", [Bare])
    bad = plugin_module("bad_probe", "register_loaders", "x")
    bad.register_denoisers = hookimpl(lambda: [])  # type: ignore[attr-defined]
    registry = build_registry(entry_points=False, extra_plugins=[good, bad], keep_broken=True)
    assert registry.stages.entries["bare_probe"].plugin == "good_probe"
    assert [b.name for b in registry.broken] == ["bad_probe"]
    assert registry.pm.get_plugin("bad_probe") is None


def test_cli_reports_a_bad_hook_result_of_a_graphroute_plugins_module(tmp_path: Path) -> None:
    (tmp_path / "bare_probe_mod.py").write_text(
        textwrap.dedent(
            '''
            from graphroute.core import Stage, StageKind, hookimpl

            class Bare(Stage):
                name = "bare_probe"
                kind = StageKind.DENOISER

                def run(self, state, ctx):
                    pass

            @hookimpl
            def register_denoisers():
                return Bare
            '''
        ),
        encoding="utf-8",
    )
    r = cli("routes", "show", "route1s_sentence", env={"PYTHONPATH": str(tmp_path), "GRAPHROUTE_PLUGINS": "bare_probe_mod"})
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not iterable" not in r.stderr
    assert "'bare_probe_mod'" in r.stderr and "register_denoisers" in r.stderr and "GRAPHROUTE_PLUGINS" in r.stderr


def test_a_hook_name_matching_no_spec_is_an_error_with_did_you_mean() -> None:
    module = plugin_module("misspelt_probe", "register_denoiser", [Bare])
    with pytest.raises(PluginError) as err:
        build_registry(entry_points=False, extra_plugins=[module])
    message = str(err.value)
    assert "'misspelt_probe'" in message and "'register_denoiser'" in message
    assert "did you mean 'register_denoisers'?" in message


def test_an_optional_hook_matching_no_spec_is_accepted() -> None:
    # pluggy's way to implement a hook another plugin may specify
    module = types.ModuleType("optional_probe")
    module.register_widgets = hookimpl(optionalhook=True)(lambda: [])  # type: ignore[attr-defined]
    registry = build_registry(entry_points=False, extra_plugins=[module])
    assert registry.broken == []


def test_a_hook_that_raises_names_plugin_and_hook() -> None:
    def fails() -> list[type[Stage]]:
        raise ImportError("No module named 'sdk'")

    module = types.ModuleType("raising_probe")
    fails.__name__ = "register_denoisers"
    module.register_denoisers = hookimpl(fails)  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match=r"'raising_probe'.*ImportError: No module named 'sdk' in register_denoisers"):
        build_registry(entry_points=False, extra_plugins=[module])


def test_a_hook_with_arguments_its_spec_lacks_names_the_plugin() -> None:
    def register_denoisers(config):  # type: ignore[no-untyped-def]
        return [Bare]

    module = types.ModuleType("argument_probe")
    module.register_denoisers = hookimpl(register_denoisers)  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match=r"'argument_probe'.*is not a valid plugin.*config"):
        build_registry(entry_points=False, extra_plugins=[module])


def test_a_broken_command_plugin_is_named_and_can_be_skipped(broken_dist: Path) -> None:
    info = broken_dist / "graphroute_broken_probe-0.3.1.dist-info" / "entry_points.txt"
    info.write_text(f"[graphroute.commands]\n{EP} = broken_probe_pkg\n", encoding="utf-8")
    env = {"PYTHONPATH": str(broken_dist)}
    r = cli("plugins", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "group `graphroute.commands`" in r.stderr
    assert_names_and_fix(r.stderr)
    assert cli("plugins", env={**env, "GRAPHROUTE_DISABLE_PLUGINS": EP}).returncode == 0


class NoRun(Stage):
    """A denoiser that forgot its `run`."""

    name = "norun_probe"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)


class TextSlot(Bare):
    """A slot written as text."""

    name = "text_slot_probe"
    consumes = ("evidense",)  # type: ignore[assignment]


class PlainParams(Bare):
    """Params on pydantic's BaseModel: an unknown key would be dropped silently."""

    name = "plain_params_probe"

    class Params(BaseModel):  # type: ignore[assignment]
        k: int = 3


class BadDefault(Bare):
    """A default its own field refuses."""

    name = "bad_default_probe"

    class Params(StageParams):
        k: int = Field(0, ge=1, le=10)


@pytest.mark.parametrize(
    ("cls", "said"),
    [
        (NoRun, "but NoRun is abstract: it does not define run"),
        (TextSlot, "but TextSlot has 'evidense' in `consumes`, which is not a Slot"),
        (PlainParams, "but PlainParams has a Params that is not a StageParams subclass"),
        (BadDefault, "but BadDefault has a parameter `k` whose default its own field refuses (0: "),
    ],
)
def test_a_stage_that_could_not_run_is_refused_when_it_registers(cls: type[Stage], said: str) -> None:
    # not in the middle of the first query that uses it
    with pytest.raises(PluginError) as err:
        build_registry(entry_points=False, extra_plugins=[plugin_module("acme_probe", "register_denoisers", [cls])])
    message = str(err.value)
    assert "'acme_probe'" in message and "register_denoisers" in message and said in message
