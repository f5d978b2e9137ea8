"""Bad configs through the CLI: exit 2, the file, the line where there is one, and the fix;
never a traceback.

tests/engine/test_cli_errors.py already covers `routes show` on a user route (unknown stage,
unknown parameter, wrong type, impossible order, malformed YAML, extends cycle, unknown
stage id). This module covers the rest: the *shipped* routes with bad ``--set``/``--disable``
values and environment overrides, ``query`` with bad routes, and bad index profiles
(``index --profile``). Most cases call the console script's ``main`` in-process (same code,
no interpreter start per case); a few run the real executable end to end.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from graphroute.core.apps.cli import main as cli
from graphroute.core.config.route import builtin_routes_dir

from tests.reliability.conftest import assert_no_traceback, run_cli

ROUTE2 = str(builtin_routes_dir() / "route2_local.yaml")


def main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``graphroute ARGS`` in-process; (exit code, stdout + stderr)."""
    capsys.readouterr()
    code = 0
    try:
        cli.main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text, text
    return code, text


def assert_explained(text: str, file: str, line: bool, *needles: str) -> None:
    """The message names the file (with ``:LINE`` when ``line``), says what is wrong and how to fix it."""
    if line:
        assert re.search(re.escape(file) + r":\d+", text), text
    else:
        assert file in text, text
    assert "fix:" in text, text
    for n in needles:
        assert n in text, (n, text)


# --------------------------------------------------------------------------- shipped routes + overrides


@pytest.mark.parametrize(
    ("args", "line", "needles"),
    [
        (["--set", "ppr.damping=abc"], True, ["bad value for `damping`", "got 'abc'"]),
        (["--set", "ppr.damping=2"], True, ["bad value for `damping`", "less than 1"]),
        (["--set", "ppr.top_k=1.5"], True, ["bad value for `top_k`", "valid integer"]),
        (["--set", "ppr.dampign=0.5"], True, ["unknown parameter `dampign`", "damping (float"]),
        (["--set", "ppr_stage.damping=0.5"], False, ["stage id 'ppr_stage'", "stage ids of this route", "ppr,"]),
        (["--disable", "score_gapp"], False, ["score_gapp", "score_gap"]),
        (["--enable", "nosuch"], False, ["nosuch", "stage ids of this route"]),
    ],
    ids=["wrong-type", "out-of-range", "int-expected", "unknown-param", "unknown-id-set", "unknown-id-disable", "unknown-id-enable"],
)
def test_shipped_route_with_bad_override(args: list[str], line: bool, needles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, text = main(["routes", "show", "route2_local", *args], capsys)
    assert code == 2, text
    assert_explained(text, ROUTE2, line, *needles)


@pytest.mark.parametrize("bad", ["malformed", "ppr=3", "=1"])
def test_malformed_set_is_explained(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = main(["routes", "show", "route1s_sentence", "--set", bad], capsys)
    assert code == 2, text
    assert "--set" in text and "STAGE_ID.PARAM=VALUE" in text


def test_extending_route_reports_the_parents_file(capsys: pytest.CaptureFixture[str]) -> None:
    """route2_skeleton extends route2_local: a bad value for an inherited stage points at the
    file and line where that stage is written."""
    code, text = main(["routes", "show", "route2_skeleton", "--set", "ppr.damping=abc"], capsys)
    assert code == 2
    assert_explained(text, ROUTE2, True, "bad value for `damping`")


def test_environment_override_with_bad_value(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHROUTE__SCORE_GAP__THRESHOLD", "high")
    code, text = main(["routes", "show", "route2_local"], capsys)
    assert code == 2
    assert_explained(text, ROUTE2, True, "bad value for `threshold`", "high")
    monkeypatch.setenv("GRAPHROUTE__SCORE_GAP__THRESHOLD", "0.4")
    code, text = main(["routes", "show", "route2_local"], capsys)
    assert code == 0 and "threshold: 0.4" in text


# --------------------------------------------------------------------------- query with bad routes

GOOD_ROUTE = """
name: mine
stages:
  - use: vector_anchors
    with: {top_k: 5}
  - use: token_budget
  - use: extractive
"""


def _route(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return str(p)


@pytest.mark.parametrize(
    ("mutate", "line", "needles"),
    [
        (lambda t: t.replace("{top_k: 5}", "{top_k: [5"), True, ["malformed YAML"]),
        (lambda t: t.replace("use: token_budget", "use: token_budgett"), True, ["unknown stage `token_budgett`", "token_budget"]),
        (lambda t: t.replace("{top_k: 5}", "{top_k: 5, depth: 2}"), True, ["unknown parameter `depth`"]),
        (lambda t: t.replace("{top_k: 5}", "{top_k: five}"), True, ["bad value for `top_k`"]),
        # the synthesizer needs evidence: putting it first cannot work
        (lambda t: t.replace("  - use: extractive\n", "").replace("stages:\n", "stages:\n  - use: extractive\n"), True, ["`extractive` needs `", "no earlier enabled stage"]),
        (lambda t: "name: mine\nextends: mine\nstages: []\n", False, ["`extends` cycle"]),
        (lambda t: t.replace("name: mine", "name: mine\nextends: no_such_parent"), False, ["no_such_parent"]),
    ],
    ids=["malformed-yaml", "unknown-stage", "unknown-param", "wrong-type", "impossible-order", "extends-self", "missing-parent"],
)
def test_query_with_bad_route_file(tmp_path: Path, mutate, line: bool, needles: list[str], capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = _route(tmp_path, "mine", mutate(textwrap.dedent(GOOD_ROUTE).lstrip()))
    code, text = main(["query", "who?", "--route", path, "--store", str(tmp_path / "store"), "--group", "g"], capsys)
    assert code == 2, text
    assert_explained(text, path, line, *needles)


def test_query_override_of_missing_stage_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _route(tmp_path, "mine", GOOD_ROUTE)
    code, text = main(["query", "who?", "--route", path, "--store", str(tmp_path / "s"), "--disable", "vector_anchor"], capsys)
    assert code == 2
    assert_explained(text, path, False, "vector_anchor", "stage ids of this route")


def test_query_unknown_route_name_end_to_end(tmp_path: Path, cache_dir: Path) -> None:
    r = run_cli("query", "who approves travel?", "--route", "route2_locall", "--store", str(tmp_path / "s"), cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 2, r.stderr
    assert "unknown route 'route2_locall'" in r.stderr and "fix:" in r.stderr and "route2_local" in r.stderr


def test_query_shipped_route_bad_set_end_to_end(tmp_path: Path, cache_dir: Path) -> None:
    r = run_cli("query", "q", "--route", "route5_unified", "--set", "ppr.top_k=-3", "--store", str(tmp_path / "s"), cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 2, r.stderr
    route5 = str(builtin_routes_dir() / "route5_unified.yaml")
    assert re.search(re.escape(route5) + r":\d+", r.stderr) and "fix:" in r.stderr and "top_k" in r.stderr


# --------------------------------------------------------------------------- index profiles


@pytest.mark.parametrize(
    ("text", "line", "needles"),
    [
        ("name: p\nparse: {max_file_mb: [1\n", 3, ["malformed YAML"]),  # YAML reports the end of the stream
        ("name: p\nparse:\n  chunk_max_tokens: 512\n  max_file_mb: lots\n", 3, ["`parse.max_file_mb`", "'lots'", "max_file_mb"]),
        ("name: p\nparse: {max_file_mb: -1}\n", 2, ["greater than 0", "(got -1)"]),
        ("name: p\nparse: {max_file_mbs: 10}\n", 2, ["`parse.max_file_mbs`", "max_file_mb,"]),
        ("name: p\nsteps:\n  - use: sentence_knn\n    wiht: {k: 2}\n", 4, ["`steps.0.wiht`", "use, with, enabled"]),
        ("name: p\nstepz: []\n", 1, ["`stepz`", "steps"]),
    ],
    ids=["malformed-yaml", "wrong-type", "out-of-range", "unknown-parse-key", "unknown-step-key", "unknown-field"],
)
def test_bad_index_profile(tmp_path: Path, text: str, line: int, needles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "profile.yaml"
    prof.write_text(text, encoding="utf-8")
    doc = tmp_path / "doc.txt"
    doc.write_text("The ferry leaves every hour from the north pier.", encoding="utf-8")
    code, out = main(["index", str(doc), "--store", str(tmp_path / "s"), "--profile", str(prof)], capsys)
    assert code == 2, out
    assert f"{prof}:{line}:" in out, out
    assert "fix:" in out
    for n in needles:
        assert n in out, (n, out)


def test_unknown_index_profile_end_to_end(tmp_path: Path, cache_dir: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("The ferry leaves every hour from the north pier.", encoding="utf-8")
    r = run_cli("index", str(doc), "--store", str(tmp_path / "s"), "--profile", "defualt", cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 2, r.stderr
    assert "unknown index profile 'defualt'" in r.stderr and "fix:" in r.stderr and "default" in r.stderr
