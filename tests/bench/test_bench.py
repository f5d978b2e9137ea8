"""The bench runner end to end on a tiny real index: caching, recall, determinism, A/B."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphroute.core.apps.bench.bench import (
    SAME_CONFIGURATION,
    BenchRunner,
    Variant,
    VerdictRule,
    aggregate,
    bench_json,
    compare,
    run_ab,
)
from graphroute.core.apps.bench.datasets import Dataset
from graphroute.core.apps.bench.metrics import recall_at_k
from graphroute.core.config.overrides import Overrides, overrides_from_mapping

from .conftest import make_runner


def test_second_prepare_skips_indexing(runner: BenchRunner, bench_files: dict[str, Path], dataset: Dataset) -> None:
    first = runner.prepare()
    again = make_runner(bench_files, dataset)
    try:
        info = again.prepare()
        assert info.cached
        assert info.group == first.group and info.group.startswith("bench-")
        assert info.documents == len(dataset.corpus)
    finally:
        again.close()


def test_every_store_document_maps_to_its_corpus_passage(runner: BenchRunner, dataset: Dataset) -> None:
    dmap = runner.doc_map()
    assert sorted(dmap.values()) == list(range(len(dataset.corpus)))
    titles = {n.id: n.props["title"] for n in runner.engine.store.iter_nodes(runner.group, "Document")}
    for doc_id, idx in dmap.items():
        assert titles[doc_id] == dataset.corpus[idx].title


def test_bm25_ranks_gold_passages_and_recall_follows_the_ranking(runner: BenchRunner, dataset: Dataset) -> None:
    run = runner.run_variant(Variant("bm25", "bm25"), progress=False)
    by_id = {r["id"]: r for r in run.per_question}
    # "symbol Hg" appears only in the element passage (index 3), not the planet of the same title
    assert by_id["hg"]["ranked"][0] == 3
    assert by_id["hg"]["signal_rank"] == 1
    for q in dataset.questions:
        rec = by_id[q.id]
        assert rec["recall@2"] == recall_at_k(rec["ranked"], q.gold, 2)
        assert len(set(rec["ranked"])) == len(rec["ranked"])
    assert run.metrics["questions"] == len(dataset.questions)
    assert run.metrics["recall@10"] >= run.metrics["recall@5"] >= run.metrics["recall@2"] > 0
    assert run.metrics["negative_pass"] is None  # no unanswerable question in this bank
    assert run.metrics["latency_ms_p95"] >= run.metrics["latency_ms_p50"] > 0
    assert run.metrics["context_tokens_mean"] > 0


def test_two_runs_give_the_same_retrieval_metrics(runner: BenchRunner) -> None:
    keys = ("recall@2", "recall@5", "recall@10", "signal_rank", "containment", "em", "f1", "context_tokens_mean")
    for route in ("bm25", "dense"):
        a = runner.run_variant(Variant(route, route), progress=False)
        b = runner.run_variant(Variant(route, route), progress=False)
        assert {k: a.metrics[k] for k in keys} == {k: b.metrics[k] for k in keys}
        assert [r["ranked"] for r in a.per_question] == [r["ranked"] for r in b.per_question]


def test_bench_json_shape(runner: BenchRunner) -> None:
    runs = [runner.run_variant(Variant(r, r), progress=False) for r in ("bm25", "dense")]
    data = bench_json(runner, runs)
    assert set(data["routes"]) == {"bm25", "dense"}
    for m in data["routes"].values():
        for key in ("questions", "recall@2", "recall@5", "recall@10", "signal_rank", "containment", "em", "f1",
                    "negative_pass", "context_tokens_mean", "latency_ms_p50", "latency_ms_p95", "index_seconds"):
            assert key in m
    assert data["dataset"]["passages"] == 8 and data["dataset"]["group"] == runner.group
    assert len(data["per_question"]) == 2 * 4


def test_overrides_change_what_is_measured(runner: BenchRunner) -> None:
    top1 = Overrides({("bm25", "top_k"): 1}, {})
    run = runner.run_variant(Variant("bm25-top1", "bm25", top1), progress=False)
    assert all(len(r["ranked"]) <= 1 for r in run.per_question)
    # with one passage per question, recall cannot grow with k
    assert run.metrics["recall@10"] == run.metrics["recall@5"] == run.metrics["recall@2"]


def test_ab_compare_counts_wins_and_decides(runner: BenchRunner) -> None:
    a = runner.run_variant(Variant("A", "bm25"), progress=False)
    b = runner.run_variant(Variant("B", "bm25", Overrides({("bm25", "top_k"): 1}, {})), progress=False)
    cmp = compare(a, b)
    wlt = cmp["per_question"]["recall@5"]
    assert wlt["wins"] + wlt["losses"] + wlt["ties"] == 4
    assert wlt["wins"] == 0  # one passage cannot beat ten on recall@5
    assert cmp["deltas"]["recall@5"] == pytest.approx(b.metrics["recall@5"] - a.metrics["recall@5"], abs=1e-4)
    assert cmp["verdict"] in ("KEEP", "REVERT") and "KEEP when" in cmp["rule"]
    same = compare(a, runner.run_variant(Variant("A2", "bm25"), progress=False), VerdictRule(min_speed_gain=float("inf")))  # latency of two equal runs is noise
    assert same["verdict"] == "SAME" and "same quality" in same["reasons"][-1]


def test_aggregate_ignores_questions_without_gold_for_recall() -> None:
    recs = [
        {"id": "1", "gold": [1], "ranked": [1], "recall@2": 1.0, "recall@5": 1.0, "recall@10": 1.0, "signal_rank": 1,
         "containment": True, "em": 1.0, "f1": 1.0, "negative": False, "answerable": True, "context_tokens": 10,
         "chunks": 1, "latency_ms": 5.0},
        {"id": "2", "gold": [], "ranked": [], "recall@2": None, "recall@5": None, "recall@10": None,
         "signal_rank": None, "containment": None, "em": None, "f1": None, "negative": True, "answerable": False,
         "context_tokens": 0, "chunks": 0, "latency_ms": 15.0},
    ]
    m = aggregate(recs)
    assert m["recall@5"] == 1.0 and m["signal_rank1"] == 1.0
    assert m["negative_pass"] == 1.0 and m["false_negative"] == 0.0
    assert m["latency_ms_p50"] == 10.0 and m["containment"] == 1.0


@pytest.mark.parametrize("before, after, verdict", [
    # reference route2 §7, as (f1, tokens, containment): #1 kept, #2 kept, #3 reverted, #5 reverted
    ((0.261, 12651, 1.0), (0.259, 10031, 1.0), "KEEP"),
    ((0.252, 8101, 1.0), (0.261, 7025, 1.0), "KEEP"),
    ((0.261, 7025, 1.0), (0.232, 8000, 0.9), "REVERT"),
    ((0.260, 5964, 1.0), (0.250, 7322, 1.0), "REVERT"),
])
def test_verdict_rule_reads_the_reference_experiment_the_same_way(
    before: tuple[float, float, float], after: tuple[float, float, float], verdict: str
) -> None:
    def m(f1: float, tokens: float, cont: float) -> dict[str, float]:
        return {"f1": f1, "context_tokens_mean": tokens, "containment": cont, "recall@5": 0.5, "negative_pass": 1.0}

    assert VerdictRule().decide(m(*before), m(*after))[0] == verdict


def test_profile_fingerprint_tracks_the_profile_content(bench_files: dict[str, Path], dataset: Dataset,
                                                        tmp_path: Path) -> None:
    edited = tmp_path / "profile.yaml"
    edited.write_text(bench_files["profile"].read_text().replace("0.90", "0.85"), encoding="utf-8")
    a = make_runner(bench_files, dataset)
    b = make_runner(bench_files, dataset)
    b.profile = str(edited)
    assert a.profile_fingerprint() == make_runner(bench_files, dataset).profile_fingerprint()
    assert a.profile_fingerprint() != b.profile_fingerprint()


def test_default_route_says_not_found_for_what_the_corpus_never_mentions(runner: BenchRunner) -> None:
    from graphroute.core.api.constants import DEFAULT_ROUTE
    from graphroute.core.query.runner import run_route

    resolved = runner.resolve(Variant(DEFAULT_ROUTE, DEFAULT_ROUTE))
    services = runner.engine.services(runner.group)

    def reason(question: str) -> tuple[bool, object]:
        result = run_route(resolved, question, services)
        stats = next(t.stats for t in result.trace if t.stage == "negative_detection")
        return result.negative, stats.get("negative_reason")

    assert reason("What is the capital of France?") == (True, "name_not_in_corpus")
    assert reason("How do you bake sourdough bread at home?") == (True, "below_min_term_coverage")
    assert reason("Which element has the symbol Hg?") == (False, None)
    assert reason("In which year was the city near Lake Baikal founded?") == (False, None)


def test_a_variant_runs_the_route_it_resolved_first(runner: BenchRunner, tmp_path: Path) -> None:
    """Commands resolve every variant before the first question; a route file edited after
    that (a rebase under a long bench) does not change the run. Overrides make the engine
    read the file anew for each resolution, so the variant must hold on to its own."""
    def route(first: str) -> str:
        return f"name: mine\nstages:\n  - use: {first}\n    with: {{top_k: 10}}\n  - use: token_budget\n  - use: extractive\n"

    ov = overrides_from_mapping({"token_budget.max_tokens": 32000})
    path = tmp_path / "mine.yaml"
    path.write_text(route("bm25"))
    v = Variant("mine", str(path), ov)
    first = runner.resolve(v)
    path.write_text(route("chunk_vector"))
    assert runner.resolve(v) is first

    def ranked(variant: Variant) -> list[list[int]]:
        return [r["ranked"] for r in runner.run_variant(variant, progress=False).per_question]

    assert ranked(v) == ranked(Variant("bm25", "bm25"))
    assert ranked(Variant("mine", str(path), ov)) == ranked(Variant("dense", "dense")) != ranked(v)


def test_variants_take_turns_question_by_question(bench_files: dict[str, Path], dataset: Dataset) -> None:
    """Whatever runs first pays for cold caches: A and B alternate which goes first on each
    question, after every variant's warm-up, and the records are those of a run alone."""
    order: list[str] = []
    r = make_runner(bench_files, dataset)
    r.on_question = lambda label, n, total: order.append(label)
    try:
        a, b = r.run_variants([Variant("A", "bm25"), Variant("B", "dense")], progress=False)
        assert order == ["A", "B", "B", "A", "A", "B", "B", "A"]
        alone = r.run_variant(Variant("B", "dense"), progress=False)
    finally:
        r.close()

    def timeless(recs: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in rec.items() if k != "latency_ms"} for rec in recs]

    assert timeless(b.per_question) == timeless(alone.per_question)
    assert [rec["id"] for rec in a.per_question] == [q.id for q in dataset.questions]
    assert {k: v for k, v in b.metrics.items() if not k.startswith("latency")} == \
        {k: v for k, v in alone.metrics.items() if not k.startswith("latency")}


def test_a_route_against_itself_is_same_without_a_second_run(runner: BenchRunner) -> None:
    cmp = run_ab(runner, Variant("A:bm25", "bm25"), Variant("B:bm25", "bm25"), progress=False)
    assert cmp["verdict"] == "SAME" and cmp["reasons"] == [SAME_CONFIGURATION]
    assert cmp["same_configuration"] is True
    assert cmp["b"]["metrics"] == cmp["a"]["metrics"]
    # an override that only touches a stage's default value runs the same route too
    same = run_ab(runner, Variant("A", "bm25"), Variant("B", "bm25", Overrides({("bm25", "top_k"): 10}, {})), progress=False)
    assert same["same_configuration"] is True
    other = run_ab(runner, Variant("A", "bm25"), Variant("B", "bm25", Overrides({("bm25", "top_k"): 1}, {})), progress=False)
    assert other["same_configuration"] is False and other["verdict"] == "REVERT"


def test_a_bench_group_is_indexed_again_when_its_embedder_reads_documents_otherwise(
    bench_files: dict[str, Path], dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's own record (corpus hash, profile) is not enough: a group whose documents
    the embedder would now read otherwise (its document_id) is indexed again, not benchmarked
    stale."""
    from graphroute.plugins.embedders.local import LocalEmbedder

    def runner() -> BenchRunner:
        return make_runner({**bench_files, "store": tmp_path / "store"}, dataset)

    first = runner()
    assert first.prepare().cached is False
    first.close()
    again = runner()
    assert again.prepare().cached is True
    again.close()
    monkeypatch.setattr(LocalEmbedder, "document_id", property(lambda self: f"{self.model_id}:read-otherwise"))
    changed = runner()
    assert changed.prepare().cached is False
    changed.close()
