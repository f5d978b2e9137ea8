"""`graphroute bench` on a route that ends in an LLM synthesizer: answer EM/F1 and, per
question, the model calls, tokens and cost, with the model and endpoint that answered (here
the loopback server's fake model, so the figures are the fake's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.apps.bench.bench import BenchRunner, Variant, bench_json
from graphroute.core.apps.bench.datasets import load_dataset
from graphroute.core.apps.bench.report import bench_markdown
from graphroute.core.apps.cli.main import cli_app
from graphroute.core.config.settings import Settings
from typer.testing import CliRunner

from tests.llm.conftest import client_params
from tests.servers import fake_model
from tests.servers.fake_apis import FakeOpenAI

PROFILE = """\
name: llm-bench-test
segmenter: {use: spacy}
embedder: {use: local}
steps:
  - use: sentence_knn
    with: {threshold: 0.90, k: 2}
"""


@pytest.fixture()
def bench_env(
    corpus_dir: Path, fake_openai: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, llm_env: None,
) -> Iterator[dict[str, Path]]:
    """The LLM pointed at the loopback server's fake model; a bench store shared by the
    tests of this module (indexed once, skeleton steps only)."""
    fake_model.install(fake_openai)
    monkeypatch.setenv("GRAPHROUTE_LLM", "openai")
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", json.dumps(client_params(fake_openai, tmp_path)))
    root = corpus_dir / "bench"
    root.mkdir(exist_ok=True)
    (root / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(root / "cache"))
    yield {"store": root / "store", "profile": root / "profile.yaml", "cache": root / "cache",
           "questions": corpus_dir / "questions.json", "corpus": corpus_dir / "corpus.json"}


def test_bench_reports_answer_quality_tokens_and_cost_per_question(bench_env: dict[str, Path], fake_openai: FakeOpenAI) -> None:
    settings = Settings()
    settings.cache_dir = bench_env["cache"]
    runner = BenchRunner(load_dataset(bench_env["questions"], bench_env["corpus"]), store=str(bench_env["store"]),
                         profile=str(bench_env["profile"]), settings=settings, warmup=False)
    try:
        offline = runner.run_variant(Variant("route1s_sentence", "route1s_sentence"), progress=False)
        assert fake_openai.count() == 0
        llm = runner.run_variant(Variant("route1s_sentence_llm", "route1s_sentence_llm"), progress=False)
        data = bench_json(runner, [offline, llm])
    finally:
        runner.close()
    assert fake_openai.chat_count(fake_model.SYNTHESIS) == 4  # one answer per question
    assert not any(k.startswith("llm_") for k in offline.metrics)
    assert all("llm_calls" not in r for r in offline.per_question)
    for r in llm.per_question:
        assert r["llm_calls"] == 1 and r["llm_prompt_tokens"] > 0 and r["llm_completion_tokens"] > 0
        assert r["llm_cost_usd"] > 0 and r["llm_model"] == f"gpt-4.1-mini at {fake_openai.url}/v1"
        assert r["em"] is not None and r["f1"] is not None
    hg = next(r for r in llm.per_question if r["id"] == "hg")
    assert hg["answer"].startswith("Mercury is a chemical element") and 0 < hg["f1"] < 1 and hg["em"] == 0
    m = llm.metrics
    assert m["llm_calls_mean"] == 1.0 and m["llm_model"] == f"gpt-4.1-mini at {fake_openai.url}/v1"
    per_q_cost = [r["llm_cost_usd"] for r in llm.per_question]
    assert m["llm_cost_usd_total"] == pytest.approx(sum(per_q_cost), abs=1e-6)
    assert m["llm_usd_per_1k_questions"] == pytest.approx(1000 * sum(per_q_cost) / 4, abs=1e-3)
    tokens = [r["llm_prompt_tokens"] + r["llm_completion_tokens"] for r in llm.per_question]
    assert m["llm_tokens_mean"] == pytest.approx(sum(tokens) / 4, abs=0.1)
    assert m["f1"] == pytest.approx(sum(r["f1"] for r in llm.per_question) / 4, abs=1e-4)

    md = bench_markdown(data)
    assert "## LLM answers" in md and f"`route1s_sentence_llm` answered by gpt-4.1-mini at {fake_openai.url}/v1" in md
    assert "### LLM per question: route1s_sentence_llm" in md and "### LLM per question: route1s_sentence\n" not in md


def test_bench_command_prints_the_llm_columns(bench_env: dict[str, Path], fake_openai: FakeOpenAI) -> None:
    args = ["bench", "--questions", str(bench_env["questions"]), "--corpus", str(bench_env["corpus"]),
            "--store", str(bench_env["store"]), "--profile", str(bench_env["profile"]),
            "--route", "route1s_sentence", "--route", "route1s_sentence_llm"]
    res = CliRunner().invoke(cli_app(), [*args, "--json"])
    assert res.exit_code == 0, res.output
    per_question = [r for r in json.loads(res.stdout)["per_question"] if r["route"] == "route1s_sentence_llm"]
    # the warm-up question is none of the bench's: every measured answer was paid for
    assert len(per_question) == 4 and all(r["llm_cost_usd"] > 0 for r in per_question)
    res = CliRunner().invoke(cli_app(), args)
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "LLM answers (calls and tokens per question; USD per 1,000 questions and in total)" in out
    for col in ("llm_calls_mean", "llm_tokens_mean", "llm_usd_per_1k_questions", "llm_cost_usd_total"):
        assert col in out
    llm_table = out.split("LLM answers")[1]
    assert "route1s_sentence_llm" in llm_table and "│ route1s_sentence " not in llm_table
    assert f"route1s_sentence_llm: answered by gpt-4.1-mini at {fake_openai.url}/v1" in out
