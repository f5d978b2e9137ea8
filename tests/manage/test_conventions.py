"""`graphroute --version` and `graphroute routes --json` through the console entry point."""

from __future__ import annotations

import json

import pytest
from graphroute.core import __version__
from graphroute.core.apps.cli.main import main
from graphroute.core.config.route import list_routes


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
