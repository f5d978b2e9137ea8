"""`graphroute new-plugin`: the generated package installs with pip, `graphroute plugins`
lists it, its own tests pass, and its stage runs inside a route on a real indexed store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.apps.scaffold import PluginNames, new_plugin
from graphroute.core.errors import ScaffoldError

BIN = Path(sys.executable).parent
GRAPHROUTE = str(BIN / "graphroute")
NAME = "scaffold-probe"  # unlikely to clash with anything installed
NAMES = PluginNames.parse(NAME)


def run(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRAPHROUTE_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def test_names_are_validated(tmp_path: Path) -> None:
    assert NAMES.ident == "scaffold_probe" and NAMES.package == "graphroute_scaffold_probe"
    assert NAMES.distribution == "graphroute-scaffold-probe" and NAMES.class_name == "ScaffoldProbe"
    assert PluginNames.parse("graphroute-foo").ident == "foo"
    for bad in ("1abc", "a", "has space", "../evil", "class", "x" * 50):
        with pytest.raises(ScaffoldError):
            PluginNames.parse(bad)
    target, _, _ = new_plugin("twice", tmp_path)
    assert (target / "pyproject.toml").is_file()
    with pytest.raises(ScaffoldError, match="already exists"):
        new_plugin("twice", tmp_path)
    r = run(GRAPHROUTE, "new-plugin", "Bad Name", "--dir", str(tmp_path))
    assert r.returncode == 2 and "bad plugin name" in r.stderr and "Traceback" not in r.stderr
    # a registered stage's name: the package would break every command once installed
    r = run(GRAPHROUTE, "new-plugin", "bm25", "--dir", str(tmp_path))
    assert r.returncode == 2 and "stage name 'bm25' is already registered by plugin" in r.stderr
    assert not (tmp_path / "graphroute-bm25").exists()


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[Path]:
    r = run(GRAPHROUTE, "new-plugin", NAME, "--dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    pkg = tmp_path / NAMES.distribution
    # --no-build-isolation / --no-deps: setuptools and graphroute are already in the venv,
    # so the install needs no package index.
    r = run(str(BIN / "pip"), "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(pkg))
    assert r.returncode == 0, r.stderr
    try:
        yield pkg
    finally:
        run(str(BIN / "pip"), "uninstall", "-y", "-q", NAMES.distribution)


def test_generated_plugin_installs_and_runs_in_a_route(installed_plugin: Path, tmp_path: Path) -> None:
    pkg = installed_plugin
    assert sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file() and "egg-info" not in p.as_posix()) == [
        "README.md", f"{NAMES.package}/__init__.py", f"{NAMES.package}/plugin.py", "pyproject.toml",
        f"tests/test_{NAMES.ident}.py",
    ]

    r = run(GRAPHROUTE, "plugins", "--json")
    assert r.returncode == 0, r.stderr
    plugins = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}
    assert plugins[NAMES.ident]["contributes"] == {"denoiser": [NAMES.ident]}
    assert plugins[NAMES.ident]["distribution"] == f"{NAMES.distribution} 0.1.0"

    r = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg / "tests"), cwd=pkg)
    assert r.returncode == 0, r.stdout + r.stderr

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text(
        "# Travel policy\n\nTravel requests are approved by the department head. "
        "Receipts must be filed within thirty days.\n", encoding="utf-8")
    (docs / "security.md").write_text(
        "# Security handbook\n\nBadges must be worn at all times on site. "
        "Lost badges are reported to the security desk.\n", encoding="utf-8")
    store = str(tmp_path / "store")
    r = run(GRAPHROUTE, "index", str(docs), "--store", store, "--group", "g", "--json")
    assert r.returncode == 0, r.stderr

    route = tmp_path / "probe.yaml"
    route.write_text(
        "name: probe\nstages:\n  - use: vector_anchors\n    with: {top_k: 4}\n"
        f"  - use: {NAMES.ident}\n    id: probe\n    with: {{boost: 5.0}}\n"
        "  - use: token_budget\n  - use: extractive\n", encoding="utf-8")
    r = run(GRAPHROUTE, "query", "Who approves travel requests?", "--route", str(route),
            "--store", store, "--group", "g", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    probe = next(t for t in result["trace"] if t["stage"] == "probe")
    assert probe["use"] == NAMES.ident and probe["enabled"] is True
    assert probe["items_in"] > 0 and probe["stats"]["boosted"] >= 1
    assert result["evidence"][0]["document"] == "Travel policy"

