"""Entry-point discovery of the example third-party plugin (examples/graphroute-example-plugin,
pip-installed by `make install`), and the duplicate-name rule between plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from graphroute.core import PluginError, Stage, StageKind, hookimpl
from graphroute.core.config.resolve import load_route
from graphroute.core.registry import build_registry

GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRAPHROUTE, *args], capture_output=True, text=True, timeout=120)


def test_plugins_json_lists_the_example_plugin() -> None:
    r = cli("plugins", "--json")
    assert r.returncode == 0, r.stderr
    plugins = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}
    example = plugins["example"]
    assert example["builtin"] is False
    assert example["distribution"].startswith("graphroute-example-plugin ")
    assert example["contributes"] == {"denoiser": ["min_length"]}


def test_plugins_shows_descriptions_and_json_the_parameters() -> None:
    # what plugin-authors.md (a stage docstring's first line) and models.md (the openai
    # client's parameters) say `graphroute plugins` shows
    r = cli("plugins", "--json")
    assert r.returncode == 0, r.stderr
    plugins = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}
    [min_length] = plugins["example"]["components"]
    assert min_length["kind"] == "denoiser" and min_length["name"] == "min_length"
    assert min_length["description"] == "Drop evidence whose text is shorter than `min_chars` characters."
    assert min_length["params"]["min_chars"] == {
        "default": 40, "minimum": 0, "type": "integer", "description": "evidence shorter than this is dropped",
    }
    [openai] = plugins["graphroute.plugins.llm.openai_chat"]["components"]
    assert openai["kind"] == "LLM client" and {"model", "base_url", "api_key_env", "timeout"} <= set(openai["params"])

    wide = subprocess.run(
        [GRAPHROUTE, "plugins"], capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"}
    )
    assert wide.returncode == 0, wide.stderr
    line = next(ln for ln in wide.stdout.splitlines() if "min_length" in ln)
    assert "example" in line and "denoiser" in line and "Drop evidence whose text is shorter" in line


def write_route(tmp_path: Path, min_chars: object) -> Path:
    route = tmp_path / "with_min_length.yaml"
    route.write_text(
        "name: with_min_length\nextends: route1s_sentence\nstages:\n"
        f"  - use: min_length\n    id: short\n    after: retrieve\n    with: {{min_chars: {min_chars}}}\n",
        encoding="utf-8",
    )
    return route


def test_a_route_using_min_length_loads_and_validates(tmp_path: Path) -> None:
    registry = build_registry()  # built-ins + entry points, as the CLI builds it
    assert registry.stages.entries["min_length"].plugin == "example"
    resolved = load_route(str(write_route(tmp_path, 25)), registry, environ={})
    ids = [s.spec.key for s in resolved.stages()]
    assert ids[:4] == ["vector_anchors", "sentence_bm25", "passage_bm25", "short"]
    short = next(s for s in resolved.stages() if s.spec.key == "short")
    assert short.cls.name == "min_length" and short.params.min_chars == 25

    r = cli("routes", "show", str(write_route(tmp_path, 25)))
    assert r.returncode == 0, r.stderr
    assert "use: min_length" in r.stdout and "min_chars: 25" in r.stdout

    r = cli("routes", "show", str(write_route(tmp_path, -5)))
    assert r.returncode == 2
    assert "stage 'short'" in r.stderr and "min_chars" in r.stderr and "Traceback" not in r.stderr


class DuplicateMinLength(Stage):
    """Another plugin's stage that takes the example plugin's name."""

    name = "min_length"
    kind = StageKind.DENOISER

    def run(self, state, ctx):  # type: ignore[no-untyped-def]
        pass


def test_duplicate_stage_name_names_both_plugins() -> None:
    other = types.ModuleType("acme_graphroute_plugin")

    @hookimpl
    def register_denoisers() -> list[type[Stage]]:
        return [DuplicateMinLength]

    other.register_denoisers = register_denoisers  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as err:
        build_registry(extra_plugins=[other])
    message = str(err.value)
    assert "min_length" in message and "'example'" in message and "'acme_graphroute_plugin'" in message


def test_a_clashing_plugin_is_broken_and_the_first_keeps_its_name() -> None:
    # first come, first served: the installed plugin keeps `min_length`; the later one is
    # broken as a whole (its other stage is not added either) and says whose name it took
    other = types.ModuleType("acme_graphroute_plugin")

    class Unclashing(DuplicateMinLength):
        """A stage of the clashing plugin whose own name is free."""

        name = "acme_free_name"

    @hookimpl
    def register_denoisers() -> list[type[Stage]]:
        return [Unclashing, DuplicateMinLength]

    other.register_denoisers = register_denoisers  # type: ignore[attr-defined]
    registry = build_registry(extra_plugins=[other], keep_broken=True)
    assert registry.stages.entries["min_length"].plugin == "example"
    assert "acme_free_name" not in registry.stages
    [broken] = registry.broken
    assert broken.name == "acme_graphroute_plugin"
    assert broken.error == ("registers stage 'min_length', which plugin 'example' already registers; "
                            "give DuplicateMinLength another name")


def test_a_module_that_is_an_entry_point_and_in_graphroute_plugins_loads_once() -> None:
    # what a plugin author has while developing: the package installed, and its module named
    # in GRAPHROUTE_PLUGINS too
    env = {**os.environ, "GRAPHROUTE_PLUGINS": "graphroute_example_plugin.plugin"}
    r = subprocess.run([GRAPHROUTE, "plugins", "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    plugins = json.loads(r.stdout)["plugins"]
    assert [p["name"] for p in plugins if p["contributes"].get("denoiser") == ["min_length"]] == ["example"]
    assert not [p for p in plugins if p.get("error")]
