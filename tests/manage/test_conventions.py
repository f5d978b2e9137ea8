"""Command-line conventions through the console entry point: `--version`, `routes --json`,
readable metavars and `--json` help on every command, shell completion, user-facing route
descriptions, and `graphroute demo` from a directory outside the repository."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from graphroute.core import __version__
from graphroute.core.apps.cli.main import cli_app, main
from graphroute.core.config.route import list_routes

GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"graphroute {__version__}\n")


def test_routes_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "routes", "--json")
    rows = json.loads(out)["routes"]
    assert code == 0 and [r["name"] for r in rows] == list(list_routes())
    r1 = next(r for r in rows if r["name"] == "route1s_sentence")
    assert r1["description"] and r1["file"].endswith("route1s_sentence.yaml")


def commands() -> Iterator[tuple[str, Any]]:
    """Every command of the CLI (typer's own click classes: checked by attribute, not type)."""

    def walk(cmd: Any, path: str) -> Iterator[tuple[str, Any]]:
        yield path, cmd
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, f"{path} {name}")

    yield from walk(typer.main.get_command(cli_app()), "graphroute")


def test_every_option_names_its_value_and_every_json_flag_says_what_it_prints() -> None:
    seen_json = []
    for path, cmd in commands():
        for p in cmd.params:
            if p.param_type_name != "option" or p.hidden:
                continue
            if not p.is_flag:
                assert p.metavar and p.metavar.upper() == p.metavar, f"{path} {p.opts}: no readable metavar"
            assert p.help, f"{path} {p.opts}: no help text"
            if "--json" in p.opts:
                seen_json.append(path)
    for name in ("groups", "documents", "delete", "stats", "routes", "plugins", "query", "index", "bench", "perf"):
        assert f"graphroute {name}" in seen_json, name


def test_help_is_plain_text_with_env_hints_and_metavars() -> None:
    r = subprocess.run([GRAPHROUTE, "query", "--help"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "--store DIR|URI" in r.stdout and "--set ID.PARAM=VALUE" in r.stdout and "-r, --route ROUTE" in r.stdout
    assert "[env GRAPHROUTE_STORE" in r.stdout  # help text, not swallowed as rich markup
    assert "<bool>" not in r.stdout and "TEXT" not in r.stdout


def test_shell_completion() -> None:
    # the script for a named shell (--show-completion prints the one of the shell it runs in)
    script = subprocess.run([GRAPHROUTE], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "_GRAPHROUTE_COMPLETE": "source_bash"})
    assert script.returncode == 0 and "_GRAPHROUTE_COMPLETE=complete_bash" in script.stdout, script.stderr
    env = {**os.environ, "_GRAPHROUTE_COMPLETE": "complete_bash", "COMP_WORDS": "graphroute gro", "COMP_CWORD": "1"}
    words = subprocess.run([GRAPHROUTE], capture_output=True, text=True, timeout=60, env=env)
    assert words.stdout.split() == ["groups"], (words.stdout, words.stderr)
    env.update(COMP_WORDS="graphroute delete --", COMP_CWORD="2")
    words = subprocess.run([GRAPHROUTE], capture_output=True, text=True, timeout=60, env=env)
    assert {"--group", "--document", "--yes", "--json"} <= set(words.stdout.split()), words.stdout


# Words of the predecessor system's internals that mean nothing to a user of graphroute.
JARGON = re.compile(r"Current Route|design consideration|Strategy [AB]|\breference\b|§|\b[A-Z]+_[A-Z_]+_ENABLED\b")


def test_route_descriptions_speak_to_users(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(capsys, "routes", "--json")
    for row in json.loads(out)["routes"]:
        assert row["description"], row["name"]
        found = JARGON.findall(row["description"])
        assert not found, (row["name"], found)


def test_demo_runs_from_any_directory(tmp_path: Path) -> None:
    env = {**os.environ, "GRAPHROUTE_PROGRESS": "0", "COLUMNS": "200"}
    env.pop("GRAPHROUTE_STORE", None)
    r = subprocess.run([GRAPHROUTE, "demo"], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "indexed 3" in r.stdout and r.stdout.count("Q:") >= 3 and "[1]" in r.stdout
    assert (tmp_path / ".graphroute" / "demo").is_dir()  # the store is made where it runs
