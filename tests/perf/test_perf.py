"""Correctness of the benchmark code (never its timings): the synthetic corpus, the model-
input recorder, the write part on a real embedded store, verdicts and the JSON shape."""

from __future__ import annotations

import json
import statistics
import uuid
from pathlib import Path

import pytest
from graphroute.core.apps.perf import perf as P

from tests.stores.test_neo4j_errors import NEO4J_URI, needs_server


def test_synthetic_corpus_is_deterministic_exact_and_grouped() -> None:
    a = P.synthetic_corpus(500, groups=4, seed=3)
    b = P.synthetic_corpus(500, groups=4, seed=3)
    assert a == b
    assert sum(len(p.sentences) for p in a) == 500
    assert {p.group for p in a} == {0, 1, 2, 3}
    assert P.synthetic_corpus(500, groups=4, seed=4) != a


def test_synthetic_groups_share_entities_inside_never_across() -> None:
    corpus = P.synthetic_corpus(2_000, groups=3)
    topics = P._topics(3, 7)
    for p in corpus:
        own = topics[p.group]
        others = [t for t in topics if t is not own]
        text = p.text
        assert any(name in text for name in own.people + own.places)
        assert not any(name in text for t in others for name in t.people)
    # a person recurs across documents of its group (the entity graph has something to link)
    first = topics[0].people[0]
    assert sum(first in p.text for p in corpus if p.group == 0) >= 2


def test_synthetic_sentences_pass_the_skeleton_noise_filters() -> None:
    for p in P.synthetic_corpus(300, groups=2):
        for s in p.sentences:
            assert s.endswith(".") and len(s) >= 12 and len(s.split()) >= 3


def test_questions_are_deterministic_and_sized() -> None:
    corpus = P.synthetic_corpus(400, groups=2)
    q = P.synthetic_questions(corpus, 7)
    assert q == P.synthetic_questions(corpus, 7) and len(q) == 7
    assert P.synthetic_questions([], 3) == []


def test_corpus_json_is_what_the_json_loader_reads(tmp_path: Path) -> None:
    from graphroute.plugins.loaders.files import JsonCorpusLoader

    corpus = P.synthetic_corpus(50, groups=2)
    path = P.write_corpus_json(corpus, tmp_path / "c.json")
    docs = list(JsonCorpusLoader().load(path))
    assert [d.title for d in docs] == [p.title for p in corpus]


def test_percentile_and_summary() -> None:
    assert P.percentile([], 50) == 0.0
    assert P.percentile([5.0], 95) == 5.0
    assert P.percentile([1, 2, 3, 4], 50) == 2.5
    assert P.percentile([1, 2, 3, 4, 100], 100) == 100
    s = P.summary([3.0, 1.0, 2.0])
    assert s["n"] == 3 and s["p50"] == 2.0


def test_recorder_keeps_the_texts_the_models_got_and_restores_the_methods() -> None:
    from graphroute.plugins.embedders.local import LocalEmbedder
    from graphroute.plugins.segmenters.spacy_segmenter import SpacySegmenter

    before = LocalEmbedder.embed, SpacySegmenter.split, dict(LocalEmbedder.__dict__)
    with P.record_model_inputs() as rec:
        spans = SpacySegmenter().split(["Contoso Ltd. is at P.O. Box 123, FL. It ships goods."])
        vecs = LocalEmbedder().embed(["[Document: a | Section: a] hello there world"])
        chunk_vecs, span_vecs = LocalEmbedder().embed_spans(["a\nhello there. world"], [2], [[(2, 14)]])
    assert (LocalEmbedder.embed, SpacySegmenter.split, dict(LocalEmbedder.__dict__)) == before
    assert len(spans[0]) == 2 and vecs.shape == (1, 384) and chunk_vecs.shape == span_vecs[0].shape == (1, 384)
    assert rec.segment == ["Contoso Ltd. is at P.O. Box 123, FL. It ships goods."]
    assert rec.embed == ["[Document: a | Section: a] hello there world"]
    assert (rec.span_texts, rec.span_heads, rec.spans) == (["a\nhello there. world"], [2], [[(2, 14)]])
    assert rec.extract == []


def test_offline_routes_are_shipped_and_llm_free() -> None:
    routes = P.offline_routes()
    assert "route1_vector" in routes and "route2_local" in routes
    from graphroute.core.config.route import load_route_file

    for r in routes:
        assert not any(u.startswith("llm_") for u in P._uses(load_route_file(r)))


def test_write_part_on_a_real_embedded_store(tmp_path: Path) -> None:
    res = P.part_write({"store": str(tmp_path / "s"), "group": "w", "cache": str(tmp_path / "c"),
                        "sentences": 200, "groups": 2})
    assert res["sentences"] == 200 == res["stored_sentences"]
    assert res["nodes"] > res["sentences"] and res["edges"] > 0 and res["sentences_per_s"] > 0
    assert res["vectors"] is True and res["stored_vectors"] > res["sentences"]  # sentences and chunks
    from graphroute.core.engine import open_store

    store = open_store(str(tmp_path / "s"))
    assert store.counts("w").get("nodes", {}) == {}  # the part removes what it wrote
    store.close()
    assert res["rounds_sentences_per_s"] == [res["sentences_per_s"]] and res["warm_up_rounds"] == 0


def test_write_part_without_vectors_writes_the_same_graph_and_no_vector(tmp_path: Path) -> None:
    """The diagnostic beside the Neo4j write target: the same nodes and edges, no vectors."""
    args = {"store": str(tmp_path / "s"), "group": "w", "cache": str(tmp_path / "c"), "sentences": 200, "groups": 2}
    with_vectors = P.part_write(args)
    without = P.part_write({**args, "vectors": False})
    assert without["vectors"] is False and without["stored_vectors"] == 0 < with_vectors["stored_vectors"]
    assert (without["stored_sentences"], without["nodes"], without["edges"]) == (
        with_vectors["stored_sentences"], with_vectors["nodes"], with_vectors["edges"])


@needs_server
def test_write_part_without_vectors_on_the_real_neo4j(tmp_path: Path) -> None:
    res = P.part_write({"store": NEO4J_URI, "group": f"perf-nv-{uuid.uuid4().hex[:8]}",
                        "cache": str(tmp_path / "c"), "sentences": 200, "groups": 2, "vectors": False})
    assert res["backend"] == "neo4j" and res["stored_sentences"] == 200 and res["stored_vectors"] == 0
    assert res["sentences_per_s"] > 0


def test_write_part_rounds_leave_the_first_out_of_the_median(tmp_path: Path) -> None:
    res = P.part_write({"store": str(tmp_path / "s"), "group": "w", "cache": str(tmp_path / "c"),
                        "sentences": 200, "groups": 2, "rounds": 4})
    rates = res["rounds_sentences_per_s"]
    assert len(rates) == 4 and res["warm_up_rounds"] == 1
    assert res["sentences_per_s"] == round(statistics.median(rates[1:]), 1)
    assert res["stored_sentences"] == 200  # each round wrote into an empty group
    note = P._rounds_note(res)
    assert note.startswith("; median of rounds ") and note.endswith(f"after a warm-up round of {P._fmt(rates[0])}")


def test_write_part_leaves_every_warm_up_round_out_of_the_median(tmp_path: Path) -> None:
    res = P.part_write({"store": str(tmp_path / "s"), "group": "w", "cache": str(tmp_path / "c"),
                        "sentences": 200, "groups": 2, "rounds": 6, "warmup_rounds": 3})
    rates = res["rounds_sentences_per_s"]
    assert len(rates) == 6 and res["warm_up_rounds"] == 3
    # three measured rounds: the median is one of them (two would average rates rounded to 0.1)
    assert res["sentences_per_s"] == round(statistics.median(rates[3:]), 1)
    note = P._rounds_note(res)
    assert note.startswith(f"; median of rounds {', '.join(P._fmt(x) for x in rates[3:])} after 3 warm-up rounds (")


def test_neo4j_writes_warm_up_longer_and_measure_the_same_rounds() -> None:
    cfg = P.PerfConfig()
    embedded, neo4j = cfg.write_rounds_for("embedded"), cfg.write_rounds_for("neo4j")
    assert embedded == {"rounds": cfg.write_rounds, "warmup_rounds": 1}
    assert neo4j["warmup_rounds"] == cfg.neo4j_write_warmup_rounds > 1
    assert neo4j["rounds"] - neo4j["warmup_rounds"] == embedded["rounds"] - embedded["warmup_rounds"]
    quick = P.PerfConfig.quick_config()
    assert quick.write_rounds_for("neo4j") == quick.write_rounds_for("embedded") == {"rounds": 1, "warmup_rounds": 0}


def _fake_result() -> dict:
    route = {"wall_ms": {"p50": 40.0, "p95": 60.0}, "stages_ms": {"a": {"p50": 30.0, "p95": 50.0}}}
    return {
        "index": {"ratio": 1.4, "reindex_s": 2.0, "raw": {"embed_s": 1.0}, "wall_s": 3.0},
        "query": {"raw_embed_ms": {"p50": 20.0}, "routes": {"r1": route}},
        "scale": {"sizes": {"10": {"peak_rss_mb": 900.0}, "20": {"peak_rss_mb": 950.0}},
                  "query": {"routes": {"r1": {"wall_ms": {"p50": 130.0, "p95": 200.0}}}, "peak_rss_mb": 1000.0}},
        "neo4j": {"write_embedded": {"sentences_per_s": 9000.0}, "skipped": "no server"},
    }


def test_verdicts_judge_each_target() -> None:
    v = P.verdicts(_fake_result())
    assert v["index_ratio"]["holds"] is False
    assert v["reindex_s"]["holds"] is True
    assert v["query_p50_over_embed_ms:r1"]["value"] == 20.0 and v["query_p50_over_embed_ms:r1"]["holds"] is False
    assert v["scale_query_factor:r1"]["value"] == 3.25 and v["scale_query_factor:r1"]["holds"] is False
    assert v["scale_peak_rss_mb"]["value"] == 1000.0 and v["scale_peak_rss_mb"]["holds"] is True
    assert v["write_embedded_sentences_per_s"]["holds"] is True
    assert v["write_neo4j_sentences_per_s"]["holds"] is None


def test_a_routes_own_raw_figure_is_its_baseline() -> None:
    """The raw embedding measured beside a route, when there is one, is what its overhead is
    over; older results without it fall back to the part's raw figure."""
    r = _fake_result()
    r["query"]["routes"]["r1"]["raw_embed_ms"] = {"p50": 28.0}
    v = P.verdicts(r)
    assert v["query_p50_over_embed_ms:r1"]["value"] == 12.0 and v["query_p50_over_embed_ms:r1"]["holds"] is True
    assert any(row[0] == "query r1 ms p50 / p95" and "raw embed beside it p50 28.0" in row[2] for row in P.table_rows(r))


def test_query_suite_measures_the_raw_embedding_beside_each_route(tmp_path: Path) -> None:
    corpus = P.synthetic_corpus(120, groups=2)
    gr = P._engine(str(tmp_path / "store"), "syn", tmp_path / "cache")
    gr.index([P.write_corpus_json(corpus, tmp_path / "corpus.json")])
    questions = P.synthetic_questions(corpus, 3)
    res = P.query_suite(gr, "syn", questions, ["dense", "bm25", "route2_local"])
    gr.close()
    assert res["raw_embed_ms"]["n"] == 3
    for name in ("dense", "bm25", "route2_local"):
        route = res["routes"][name]
        assert route["wall_ms"]["n"] == 3 and route["raw_embed_ms"]["n"] == 3
        assert route["raw_embed_ms"]["p50"] > 0
    # only the route that finds names offline runs spaCy on the question, so only it gets
    # spaCy's raw call timed beside it
    assert res["routes"]["route2_local"]["raw_spacy_ms"]["n"] == 3
    assert res["routes"]["route2_local"]["raw_spacy_ms"]["p50"] > 0
    assert "raw_spacy_ms" not in res["routes"]["dense"] and "raw_spacy_ms" not in res["routes"]["bm25"]
    # the ppr stage's trace figures, for the route that runs it only
    assert res["routes"]["route2_local"]["ppr"]["questions"] == 3
    assert "ppr" not in res["routes"]["dense"]


def test_ppr_summary_gives_how_much_the_walk_read_and_its_error_bounds() -> None:
    s = P.ppr_summary([
        {"solver": "push", "nodes_touched": 10, "l1_error_bound": 1e-5, "eps": 1e-6, "engine": "in the database"},
        {"solver": "push", "nodes_touched": 30, "l1_error_bound": 3e-5, "eps": 1e-7, "engine": "from the client"},
        {"solver": "cg", "converged": True},
    ])
    assert s["solver"] == ["cg", "push"] and s["questions"] == 3
    assert s["engine"] == ["from the client", "in the database"]  # which push engines ran
    assert s["nodes_touched"] == {"p50": 20.0, "max": 30.0}
    assert s["l1_error_bound"]["max"] == 3e-5 and s["eps"]["p50"] == 5.5e-7
    assert "rows_read" not in s  # no question reported it


def test_the_table_prints_a_spacy_routes_p50_over_both_models() -> None:
    """Diagnostic beside the target: wall p50 less the raw embedding and the raw question
    spaCy call; the target itself still reads the embedding alone."""
    r = _fake_result()
    r["query"]["routes"]["r1"]["raw_embed_ms"] = {"p50": 28.0}
    r["query"]["routes"]["r1"]["raw_spacy_ms"] = {"p50": 4.5}
    note = next(row[2] for row in P.table_rows(r) if row[0] == "query r1 ms p50 / p95")
    assert "raw question spaCy beside it p50 4.50, p50 over both 7.50" in note
    assert P.verdicts(r)["query_p50_over_embed_ms:r1"]["value"] == 12.0
    del r["query"]["routes"]["r1"]["raw_spacy_ms"]
    assert "spaCy" not in next(row[2] for row in P.table_rows(r) if row[0] == "query r1 ms p50 / p95")


def test_table_names_every_figure_and_verdict() -> None:
    r = _fake_result()
    r["verdicts"] = P.verdicts(r)
    names = [row[0] for row in P.table_rows(r)]
    assert "index: ratio wall / raw" in names and "query r1 ms p50 / p95" in names
    assert "target index_ratio" in names and ("neo4j", "skipped", "no server") in P.table_rows(r)
    json.dumps(r)  # the result is plain JSON


def test_quick_config_shrinks_every_part() -> None:
    q, full = P.PerfConfig.quick_config(), P.PerfConfig()
    assert q.quick and q.passages and q.passages < 1890
    assert q.scale_sentences[1] < full.scale_sentences[1] and q.write_sentences < full.write_sentences
    assert full.scale_sentences[1] == 100_000


@pytest.mark.parametrize("argv", [[], ["part", "nope", "{}"]])
def test_part_entry_point_rejects_bad_usage(argv: list[str]) -> None:
    assert P.part_main(argv) == 2
