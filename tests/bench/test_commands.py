"""The bench, ab and ablate commands through the real CLI on the tiny bench index."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from graphroute.core.apps.cli.main import cli_app
from graphroute.core.errors import RouteConfigError
from typer.testing import CliRunner

from .conftest import PASSAGES

ABLATION_ROUTE = """\
name: bench_ablation_test
stages:
  - use: bm25
    with: {top_k: 6}
  - use: md5_dedup
  - use: keyword_overlap
  - use: vector_fallback
    enabled: false
  - use: token_budget
  - use: extractive
"""

# a denoiser inside a parallel block that is switched off: toggling it changes nothing that runs
IDLE_BLOCK_ROUTE = """\
name: bench_idle_block_test
stages:
  - id: spare
    enabled: false
    parallel:
      - - use: chunk_vector
        - use: md5_dedup
          id: spare_dedup
  - use: bm25
    with: {top_k: 6}
  - use: keyword_overlap
  - use: token_budget
  - use: extractive
"""


@pytest.fixture(scope="module")
def cli() -> CliRunner:
    return CliRunner()


@pytest.fixture
def env(bench_files: dict[str, Path], runner: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    routes = tmp_path / "routes"
    routes.mkdir()
    (routes / "bench_ablation_test.yaml").write_text(ABLATION_ROUTE, encoding="utf-8")
    (routes / "bench_idle_block_test.yaml").write_text(IDLE_BLOCK_ROUTE, encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_ROUTES", str(routes))
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(bench_files["cache"]))
    monkeypatch.setenv("GRAPHROUTE_PROGRESS", "0")
    return ["--questions", str(bench_files["questions"]), "--corpus", str(bench_files["corpus"]),
            "--store", str(bench_files["store"]), "--profile", str(bench_files["profile"])]


def test_bench_json_and_out_folder(cli: CliRunner, env: list[str], tmp_path: Path) -> None:
    out = tmp_path / "report"
    res = cli.invoke(cli_app(), ["bench", *env, "--route", "bm25", "--route", "dense", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data["routes"]) == {"bm25", "dense"}
    assert data["dataset"]["index_cached"] is True  # the session fixture indexed it already
    assert json.loads((out / "bench.json").read_text())["routes"] == data["routes"]
    # every question's record was appended as it was scored (the routes take turns): the
    # same records, each route's in question order
    lines = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sorted(lines, key=lambda r: r["route"] != "bm25") == data["per_question"]
    md = (out / "report.md").read_text()
    assert "| bm25 |" in md and "## Per question: dense" in md
    for png in ("recall.png", "latency.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_set_applies_where_the_stage_exists(cli: CliRunner, env: list[str]) -> None:
    res = cli.invoke(cli_app(), ["bench", *env, "-r", "bm25", "-r", "dense", "--set", "bm25.top_k=1", "--json", "--limit", "2"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert all(len(r["ranked"]) <= 1 for r in data["per_question"] if r["route"] == "bm25")
    assert any(len(r["ranked"]) > 1 for r in data["per_question"] if r["route"] == "dense")
    bad = cli.invoke(cli_app(), ["bench", *env, "-r", "bm25", "--disable", "no_such_stage"])
    assert bad.exit_code != 0


def test_ab_one_route_with_b_overrides(cli: CliRunner, env: list[str]) -> None:
    res = cli.invoke(cli_app(), ["ab", *env, "--route", "bm25", "--b-set", "bm25.top_k=1", "--json"])
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    assert cmp["b"]["set"] == {"bm25.top_k": 1}
    assert cmp["per_question"]["recall@5"]["wins"] == 0
    assert cmp["verdict"] in ("KEEP", "REVERT") and cmp["rule"].startswith("KEEP when")
    text = cli.invoke(cli_app(), ["ab", *env, "--route", "bm25", "--route", "dense", "--limit", "2"])
    assert text.exit_code == 0, text.output
    assert "verdict:" in text.stdout and "wins" in text.stdout


def test_ab_of_a_route_against_itself_is_same(cli: CliRunner, env: list[str]) -> None:
    res = cli.invoke(cli_app(), ["ab", *env, "-r", "bm25", "-r", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    assert cmp["verdict"] == "SAME" and cmp["same_configuration"] is True
    assert any("same configuration as A" in n for n in cmp["notes"])
    text = cli.invoke(cli_app(), ["ab", *env, "-r", "bm25", "-r", "bm25"])
    assert "verdict: SAME (B resolves to the same configuration as A" in text.stdout


def test_ab_names_the_b_override_that_changes_nothing(cli: CliRunner, env: list[str], tmp_path: Path) -> None:
    # vector_fallback is `enabled: false` in the route: a parameter of it changes nothing
    res = cli.invoke(cli_app(), ["ab", *env, "--route", "bench_ablation_test", "--b-set", "vector_fallback.k=7",
                                 "--json", "--out", str(tmp_path / "ab")])
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    assert cmp["notes"][0] == ("vector_fallback is disabled in bench_ablation_test: --b-set vector_fallback.k=7 "
                               "changes nothing; add --b-enable vector_fallback")
    assert cmp["verdict"] == "SAME" and cmp["same_configuration"] is True
    assert "> warning: vector_fallback is disabled" in (tmp_path / "ab" / "ab.md").read_text()
    # a stage switched to the state it is in, a parameter set to the value it has
    res = cli.invoke(cli_app(), ["ab", *env, "--route", "bench_ablation_test", "--b-enable", "md5_dedup",
                                 "--b-set", "bm25.top_k=6", "--json"])
    cmp = json.loads(res.stdout)
    assert cmp["notes"][:2] == [
        "bm25.top_k is already 6 in bench_ablation_test: --b-set bm25.top_k=6 changes nothing",
        "md5_dedup is already enabled in bench_ablation_test: --b-enable md5_dedup changes nothing",
    ]
    assert cmp["verdict"] == "SAME" and cmp["same_configuration"] is True
    # with --b-enable the override is a real change: no note, B runs
    res = cli.invoke(cli_app(), ["ab", *env, "--route", "bench_ablation_test", "--b-set", "vector_fallback.k=7",
                                 "--b-enable", "vector_fallback", "--json", "--limit", "2"])
    cmp = json.loads(res.stdout)
    assert cmp["notes"] == [] and cmp["same_configuration"] is False


def test_ablate_does_not_run_a_step_that_changes_nothing(cli: CliRunner, env: list[str]) -> None:
    res = cli.invoke(cli_app(), ["ablate", "--route", "bench_idle_block_test", *env, "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    steps = {s["stage"]: s for s in result["steps"]}
    idle = steps["spare_dedup"]  # its block is off, with or without it
    assert idle["verdict"] == "SAME" and idle["ran"] is False, idle
    assert "parallel block spare is disabled" in idle["reasons"][0]
    assert steps["keyword_overlap"]["ran"] is True
    assert "spare_dedup" in result["same"]


def test_ablate_is_sequential_and_reverted_stages_stay_off(cli: CliRunner, env: list[str], tmp_path: Path) -> None:
    res = cli.invoke(cli_app(), ["ablate", "--route", "bench_ablation_test", *env, "--json", "--out", str(tmp_path / "abl")])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["toggleable"] == ["md5_dedup", "keyword_overlap", "vector_fallback", "token_budget"]
    assert result["required"] == ["token_budget"]  # the synthesizer needs its context
    steps = result["steps"]
    assert [s["stage"] for s in steps] == [None, "md5_dedup", "keyword_overlap", "vector_fallback"]
    assert steps[0]["enabled"] == []
    kept: list[str] = []
    for s in steps[1:]:
        assert s["enabled"] == sorted([*kept, s["stage"]])  # earlier REVERTs are off
        if s["verdict"] == "KEEP":
            kept.append(s["stage"])
        # four questions cannot tell a latency change from noise: no verdict rests on it
        assert [r for r in s["reasons"] if "p50 latency" in r and "within noise" not in r] == [], s
    assert result["kept"] == kept
    assert (tmp_path / "abl" / "ablate.md").read_text().count("| ") > 5
    # the table's output ends with the flags of the kept configuration, as the JSON has them
    table = cli.invoke(cli_app(), ["ablate", "--route", "bench_ablation_test", *env])
    final = " ".join(result["final_overrides"]) or "none"
    assert table.exit_code == 0 and f"final overrides: {final}" in table.stdout
    # only the flags that change the route as written: md5_dedup and keyword_overlap are on in
    # it, vector_fallback off, so none of these can be among them, whatever the verdicts
    for flag in ("--enable md5_dedup", "--enable keyword_overlap", "--disable vector_fallback"):
        assert flag not in result["final_overrides"]
    assert set(result["final_overrides"]) == (
        {f"--disable {s}" for s in result["reverted"] + result["same"] if s != "vector_fallback"}
        | {f"--enable {s}" for s in result["kept"] if s == "vector_fallback"})


def test_ablate_stage_names_the_stages_to_toggle(cli: CliRunner, env: list[str]) -> None:
    # a retriever is no denoiser: only --stage puts it into the ablation, in route order; this
    # route's only retriever feeds the stages after it, so it is required and stays on
    res = cli.invoke(cli_app(), ["ablate", "--route", "bench_ablation_test", *env, "--json",
                                 "--stage", "keyword_overlap", "--stage", "bm25", "--limit", "2"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["toggleable"] == ["bm25", "keyword_overlap"]
    assert result["required"] == ["bm25"]
    assert [s["stage"] for s in result["steps"]] == [None, "keyword_overlap"]
    assert result["steps"][0]["enabled"] == []  # md5_dedup, a denoiser not named, keeps its route setting
    bad = cli.invoke(cli_app(), ["ablate", "--route", "bench_ablation_test", *env, "--stage", "no_such_stage"])
    assert bad.exit_code != 0 and "no_such_stage" in str(bad.exception)


def test_unanswerable_question_counts_for_negative_pass(cli: CliRunner, env: list[str], tmp_path: Path) -> None:
    bank = tmp_path / "neg.jsonl"
    bank.write_text(json.dumps({"id": "n1", "question": "zzqx wvvy", "answerable": False}) + "\n", encoding="utf-8")
    args = list(env)
    args[1] = str(bank)
    res = cli.invoke(cli_app(), ["bench", *args, "-r", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    rec = data["per_question"][0]
    # no query term is in the corpus: bm25 finds nothing and the route answers "not found"
    assert rec["negative"] is True
    assert data["routes"]["bm25"]["negative_pass"] == 1.0


def test_bench_prints_answerable_and_unanswerable_side_by_side(cli: CliRunner, env: list[str], tmp_path: Path) -> None:
    bank = tmp_path / "mixed.jsonl"
    rows = [{"id": "hg", "question": "Which element has the symbol Hg?", "answer": "Mercury", "gold": [PASSAGES[3]]},
            {"id": "n1", "question": "zzqx wvvy", "answerable": False}]
    bank.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    args = list(env)
    args[1] = str(bank)
    res = cli.invoke(cli_app(), ["bench", *args, "-r", "bm25", "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "answerable vs unanswerable" in res.stdout
    row = next(line for line in res.stdout.splitlines()[::-1] if "bm25" in line)
    # answerable 1, R@5 1.0, containment 1.0, false_negative 0, unanswerable 1, negative_pass 1.0
    assert [c.strip() for c in row.split("│")[2:8]] == ["1", "1.000", "1.000", "0.000", "1", "1.000"]
    assert "## Answerable and unanswerable questions" in (tmp_path / "rep" / "report.md").read_text()
    # --answerable-only: the unanswerable question is left out of the run
    only = cli.invoke(cli_app(), ["bench", *args, "-r", "bm25", "--answerable-only", "--json"])
    assert only.exit_code == 0, only.output
    data = json.loads(only.stdout)
    assert [r["id"] for r in data["per_question"]] == ["hg"]
    assert data["routes"]["bm25"]["unanswerable"] == 0 and data["routes"]["bm25"]["negative_pass"] is None


def test_ablate_stage_takes_a_parallel_block_id(cli: CliRunner, env: list[str]) -> None:
    res = cli.invoke(cli_app(), ["ablate", "--route", "bench_idle_block_test", *env, "--json",
                                 "--stage", "keyword_overlap", "--stage", "spare", "--limit", "2"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["toggleable"] == ["spare", "keyword_overlap"]  # route order
    spare = next(s for s in result["steps"] if s["stage"] == "spare")
    assert spare["ran"] is True  # switching the block on adds its retriever


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "-r", "no_such_route"],
        ["ab", "-r", "bm25", "--b-set", "bm25.top_k=minus"],
        ["ablate", "--route", "bench_ablation_test", "--stage", "no_such_stage"],
    ],
)
def test_a_bad_route_or_stage_is_refused_before_the_corpus_is_indexed(
    cli: CliRunner, env: list[str], tmp_path: Path, command: list[str]
) -> None:
    fresh = tmp_path / "fresh-store"
    args = list(env)
    args[args.index("--store") + 1] = str(fresh)
    res = cli.invoke(cli_app(), [*command, *args])
    assert isinstance(res.exception, RouteConfigError), res.output  # the CLI's exit 2
    assert "indexed in" not in res.output
    db = fresh / "graph.sqlite"
    assert not db.exists() or sqlite3.connect(db).execute("select count(*) from nodes").fetchone() == (0,)
