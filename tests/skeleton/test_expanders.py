"""Rules of the vector and skeleton expanders on the hand-built corpus (real store, real model)."""

from __future__ import annotations

import pytest
from graphroute.core.api.models import Evidence
from graphroute.plugins.expanders.vector import (
    ChunkVector,
    SentenceWindow,
    SkeletonTraverse,
    VectorAnchors,
    sentence_evidence,
)

from .conftest import Corpus


def anchor(corpus: Corpus, sid: str, score: float) -> Evidence:
    return sentence_evidence(corpus.sentence(sid), score, source="vector_anchors", role="anchor")


# --------------------------------------------------------------------------- chunk_vector


def test_chunk_vector_returns_top_k_chunks_best_first_with_citation_fields(corpus: Corpus) -> None:
    state, ctx = corpus.run(ChunkVector(ChunkVector.Params(top_k=2)), question="How much may a hotel cost per night?")
    assert [e.kind for e in state.evidence] == ["chunk", "chunk"]
    assert state.evidence[0].id == "travel:chk0"  # the hotel cap lives there
    assert state.evidence[0].score >= state.evidence[1].score
    top = state.evidence[0]
    assert top.document == "Travel Policy" and top.document_id == "travel"
    assert top.section_path == "Travel Policy"
    assert top.text == corpus.chunk_text["travel:chk0"]
    assert (top.char_offset, top.char_length) == (0, len(top.text))
    assert ctx.stats["hits"] == 2 and ctx.stats["added"] == 2


def test_chunk_vector_adds_only_missing_chunks_to_an_existing_pool(corpus: Corpus) -> None:
    first, _ = corpus.run(ChunkVector(ChunkVector.Params(top_k=1)), question="hotel cost per night")
    state, ctx = corpus.run(ChunkVector(ChunkVector.Params(top_k=3)), first.evidence, question="hotel cost per night")
    assert len({e.id for e in state.evidence}) == len(state.evidence) == 3
    assert ctx.stats["added"] == 2


# --------------------------------------------------------------------------- vector_anchors


def test_vector_anchors_carry_skeleton_metadata(corpus: Corpus) -> None:
    state, ctx = corpus.run(VectorAnchors(VectorAnchors.Params(top_k=3)), question="What is the hotel cost limit per night?")
    assert ctx.stats["anchors"] == 3
    scores = [e.score for e in state.evidence]
    assert scores == sorted(scores, reverse=True)
    top = state.evidence[0]
    node = corpus.sentence("travel:sen2")
    assert top.id == "travel:sen2" and top.kind == "sentence"
    assert top.metadata["role"] == "anchor"
    assert top.metadata["parent_paragraph_id"] == node.props["parent_paragraph_id"]
    assert top.metadata["parent_paragraph_text"] == node.props["parent_paragraph_text"]
    assert top.chunk_id == "travel:chk0" and top.page == 1 and top.section_path == "Travel Policy"
    # chunk-frame offsets: the cited span is exactly the sentence inside its chunk
    assert corpus.chunk_text[top.chunk_id][top.char_offset : top.char_offset + top.char_length] == top.text
    assert top.metadata["offset_frame"] == "chunk"


def test_vector_anchors_min_score_drops_weak_hits(corpus: Corpus) -> None:
    all_hits, _ = corpus.run(VectorAnchors(VectorAnchors.Params(top_k=10)), question="hotel cost per night")
    floor = all_hits.evidence[2].score
    state, _ = corpus.run(VectorAnchors(VectorAnchors.Params(top_k=10, min_score=floor)), question="hotel cost per night")
    assert [e.id for e in state.evidence] == [e.id for e in all_hits.evidence if e.score >= floor]


# --------------------------------------------------------------------------- sentence_window


def test_paragraph_display_is_zero_hop_and_cites_the_paragraph_span(corpus: Corpus) -> None:
    ev = anchor(corpus, "travel:sen1", 0.7)
    state, _ = corpus.run(SentenceWindow(SentenceWindow.Params(window=0)), [ev])
    (par,) = state.evidence
    assert par.id == "travel:par0" and par.kind == "paragraph"
    assert par.text == corpus.sentence("travel:sen1").props["parent_paragraph_text"]
    assert par.score == 0.7
    assert corpus.chunk_text["travel:chk0"][par.char_offset : par.char_offset + par.char_length] == par.text
    assert par.metadata["anchors"][0]["id"] == "travel:sen1"


def test_anchors_sharing_a_paragraph_merge_into_one_record_with_the_best_score(corpus: Corpus) -> None:
    evs = [anchor(corpus, "travel:sen4", 0.5), anchor(corpus, "travel:sen6", 0.8), anchor(corpus, "travel:sen2", 0.6)]
    state, ctx = corpus.run(SentenceWindow(SentenceWindow.Params(window=0)), evs)
    by_id = {e.id: e for e in state.evidence}
    assert set(by_id) == {"travel:par3", "travel:par1"}
    assert by_id["travel:par3"].score == 0.8
    assert by_id["travel:par3"].metadata["anchor_count"] == 2
    assert [a["id"] for a in by_id["travel:par3"].metadata["anchors"]] == ["travel:sen6", "travel:sen4"]
    assert ctx.stats["merged_anchors"] == 1


def test_short_paragraph_window_stops_at_the_chunk_edge(corpus: Corpus) -> None:
    # travel:par2 (one sentence) opens chunk 1: nothing before it in this chunk, although
    # the previous chunk ends with travel:sen2; after it, two sentences of the next paragraph
    ev = anchor(corpus, "travel:sen3", 0.9)
    state, ctx = corpus.run(SentenceWindow(SentenceWindow.Params(window=2, short_paragraph_chars=200)), [ev])
    (par,) = state.evidence
    assert par.metadata["window_ids"] == ["travel:sen4", "travel:sen5"]
    assert "Hotel" not in par.text  # previous chunk never reached
    chunk = corpus.chunk_text["travel:chk1"]
    assert chunk[par.char_offset : par.char_offset + par.char_length] == par.text
    assert par.text.startswith("Receipts must be submitted") and par.text.endswith("signed declaration.")
    assert "text_stripped" not in par.metadata
    assert ctx.stats["window_sentences"] == 2


def test_window_counts_from_the_paragraph_edges_and_ends_at_the_last_sentence(corpus: Corpus) -> None:
    # travel:par1 is the last paragraph of chunk 0: window 2 before it, none after (chunk edge)
    ev = anchor(corpus, "travel:sen2", 0.9)
    state, _ = corpus.run(SentenceWindow(SentenceWindow.Params(window=2)), [ev])
    assert state.evidence[0].metadata["window_ids"] == ["travel:sen0", "travel:sen1"]
    state, _ = corpus.run(SentenceWindow(SentenceWindow.Params(window=1)), [ev])
    assert state.evidence[0].metadata["window_ids"] == ["travel:sen1"]


def test_long_paragraphs_are_not_widened(corpus: Corpus) -> None:
    ev = anchor(corpus, "travel:sen3", 0.9)
    state, ctx = corpus.run(SentenceWindow(SentenceWindow.Params(window=2, short_paragraph_chars=10)), [ev])
    assert state.evidence[0].metadata["display"] == "paragraph"
    assert "window_ids" not in state.evidence[0].metadata
    assert ctx.stats["short_paragraphs"] == 0


def test_non_sentence_evidence_passes_through(corpus: Corpus) -> None:
    other = Evidence(id="x", text="a chunk", score=0.1, kind="chunk")
    state, _ = corpus.run(SentenceWindow(), [other, anchor(corpus, "travel:sen0", 0.5)])
    assert [e.id for e in state.evidence] == ["x", "travel:par0"]


# --------------------------------------------------------------------------- skeleton_traverse


def run_traverse(corpus: Corpus, evs: list[Evidence], **params: object) -> tuple[dict[str, Evidence], dict[str, object]]:
    state, ctx = corpus.run(SkeletonTraverse(SkeletonTraverse.Params(**params)), evs)
    return {e.id: e for e in state.evidence}, ctx.stats


def test_related_to_expansion_score_is_anchor_times_similarity_times_decay(corpus: Corpus) -> None:
    out, stats = run_traverse(corpus, [anchor(corpus, "travel:sen3", 0.6)], window=0, parent_chunks=False)
    rel = out["travel:sen5"]
    assert rel.metadata["role"] == "related" and rel.metadata["from_anchor"] == "travel:sen3"
    assert rel.score == pytest.approx(0.6 * 0.93 * 0.8)
    assert stats["related_added"] == 1 and stats["window_added"] == 0
    # the edge is stored sen3 -> sen5 and is followed from either end
    out, _ = run_traverse(corpus, [anchor(corpus, "travel:sen5", 0.5)], window=0, parent_chunks=False, decay=0.5)
    assert out["travel:sen3"].score == pytest.approx(0.5 * 0.93 * 0.5)


def test_window_neighbours_decay_per_step_and_stay_inside_the_chunk(corpus: Corpus) -> None:
    out, stats = run_traverse(corpus, [anchor(corpus, "travel:sen4", 1.0)], related=False, parent_chunks=False)
    # chunk 1 holds sen3..sen6: two after sen4 would be sen5, sen6; one before is sen3 (chunk start)
    assert set(out) == {"travel:sen4", "travel:sen3", "travel:sen5", "travel:sen6"}
    assert out["travel:sen3"].score == pytest.approx(0.8)
    assert out["travel:sen5"].score == pytest.approx(0.8)
    assert out["travel:sen6"].score == pytest.approx(0.64)
    assert out["travel:sen6"].metadata["distance"] == 2
    assert stats["window_added"] == 3
    # the first sentence of a chunk gets no predecessor from the previous chunk
    out, _ = run_traverse(corpus, [anchor(corpus, "travel:sen3", 1.0)], related=False, parent_chunks=False)
    assert not any(e.chunk_id == "travel:chk0" for e in out.values())


def test_dedup_by_sentence_id_keeps_the_best_score(corpus: Corpus) -> None:
    # sen5 is a window neighbour of sen4 (0.9 x 0.8 = 0.72) and RELATED_TO sen3 (0.5 x 0.93 x 0.8)
    evs = [anchor(corpus, "travel:sen4", 0.9), anchor(corpus, "travel:sen3", 0.5)]
    state, _ = corpus.run(SkeletonTraverse(SkeletonTraverse.Params(window=1, parent_chunks=False)), evs)
    ids = [e.id for e in state.evidence]
    assert len(ids) == len(set(ids))
    sen5 = next(e for e in state.evidence if e.id == "travel:sen5")
    assert sen5.score == pytest.approx(max(0.9 * 0.8, 0.5 * 0.93 * 0.8))
    assert sen5.metadata["role"] == "window"
    # an anchor reached by another anchor's expansion keeps its own record and vector score
    # (0.5), although the window would give it 0.9 x 0.8: expansion only adds
    sen3 = next(e for e in state.evidence if e.id == "travel:sen3")
    assert sen3.score == 0.5 and sen3.metadata["role"] == "anchor"


def test_parent_chunk_and_section_context(corpus: Corpus) -> None:
    evs = [anchor(corpus, "travel:sen4", 0.9), anchor(corpus, "travel:sen6", 0.7)]
    out, stats = run_traverse(corpus, evs, window=0, related=False)
    chunk = out["travel:chk1"]
    assert chunk.kind == "chunk" and chunk.metadata["role"] == "parent_chunk"
    assert chunk.score == pytest.approx(0.9 * 0.8)
    assert chunk.section_path == "Travel Policy" and chunk.document == "Travel Policy"
    assert sorted(chunk.metadata["anchors"]) == ["travel:sen4", "travel:sen6"]
    assert stats["parent_chunks_added"] == 1


def test_verify_boosts_linked_anchors_and_penalises_isolated_ones(corpus: Corpus) -> None:
    # sen3 and sen5 are linked by RELATED_TO; sen0 has no link to another anchor
    evs = [anchor(corpus, "travel:sen0", 0.80), anchor(corpus, "travel:sen3", 0.75), anchor(corpus, "travel:sen5", 0.70)]
    out, stats = run_traverse(corpus, evs, window=0, parent_chunks=False, related=False, verify=True)
    assert out["travel:sen3"].score == pytest.approx(0.75 * 1.1)
    assert out["travel:sen5"].score == pytest.approx(0.70 * 1.1)
    assert out["travel:sen0"].score == pytest.approx(0.80 * 0.9)
    assert stats["verified_boosted"] == 2 and stats["verified_penalised"] == 1
    # verification reorders: the corroborated anchors now outrank the isolated one
    assert out["travel:sen3"].score > out["travel:sen0"].score
    # factors are parameters
    out, _ = run_traverse(corpus, evs, window=0, parent_chunks=False, related=False, verify=True, verify_boost=0.5, verify_penalty=0.5)
    assert out["travel:sen3"].score == pytest.approx(0.75 * 1.5)
    assert out["travel:sen0"].score == pytest.approx(0.80 * 0.5)


def test_verify_expansion_uses_the_adjusted_anchor_score(corpus: Corpus) -> None:
    evs = [anchor(corpus, "travel:sen3", 0.75), anchor(corpus, "travel:sen5", 0.70)]
    out, _ = run_traverse(corpus, evs, window=1, parent_chunks=False, related=False, verify=True)
    # sen4 is sen3's next neighbour: boosted anchor score x window decay
    assert out["travel:sen4"].score == pytest.approx(max(0.75 * 1.1, 0.70 * 1.1) * 0.8)


def test_verify_without_any_link_among_anchors_changes_nothing(corpus: Corpus) -> None:
    evs = [anchor(corpus, "travel:sen0", 0.8), anchor(corpus, "security:sen2", 0.6)]
    out, stats = run_traverse(corpus, evs, window=0, parent_chunks=False, related=False, verify=True)
    assert out["travel:sen0"].score == 0.8 and out["security:sen2"].score == 0.6
    assert stats["verified_boosted"] == 0 and stats["verified_penalised"] == 0


def test_append_placement_ranks_strategy_b_after_the_existing_pool(corpus: Corpus) -> None:
    pool = [Evidence(id="r2:a", text="route 2 chunk", score=0.30), Evidence(id="r2:b", text="another", score=0.05)]
    evs = [*pool, anchor(corpus, "travel:sen4", 0.9), anchor(corpus, "travel:sen3", 0.6)]
    state, _ = corpus.run(SkeletonTraverse(SkeletonTraverse.Params(placement="append")), evs)
    assert [e.id for e in state.evidence[:2]] == ["r2:a", "r2:b"]
    tail = state.evidence[2:]
    assert tail and all(e.score < 0.05 for e in tail)
    raw = [e.metadata["skeleton_score"] for e in tail]
    assert raw == sorted(raw, reverse=True)  # own order kept
    # gaps are kept: shifted scores differ exactly like the raw ones
    assert tail[0].score - tail[1].score == pytest.approx(raw[0] - raw[1])


def test_score_placement_merges_strategy_b_into_the_pool_by_score(corpus: Corpus) -> None:
    pool = [Evidence(id="r2:a", text="route 2 chunk", score=0.30), Evidence(id="r2:b", text="another", score=0.05)]
    evs = [*pool, anchor(corpus, "travel:sen4", 0.9)]
    state, _ = corpus.run(SkeletonTraverse(SkeletonTraverse.Params(placement="score")), evs)
    scores = [e.score for e in state.evidence]
    assert scores == sorted(scores, reverse=True)
    assert state.evidence[0].id == "travel:sen4" and state.evidence[0].score == 0.9


def test_no_anchors_is_a_no_op(corpus: Corpus) -> None:
    pool = [Evidence(id="c", text="chunk", score=1.0)]
    state, ctx = corpus.run(SkeletonTraverse(), pool)
    assert [e.id for e in state.evidence] == ["c"]
    assert ctx.stats["anchors"] == 0


def test_chunk_display_shows_each_sentence_as_its_whole_chunk_once(corpus: Corpus) -> None:
    # sen4 and sen6 share chunk travel:chk1; sen0 sits in chk0; a non-sentence passes through
    # a passage hit on chk0 (a chunk-level search) joins chk0's record; x passes through
    other = Evidence(id="x", text="a table row", score=0.05, kind="row")
    passage = Evidence(id="travel:chk0", text="whole chunk", score=0.8, kind="chunk")
    evs = [anchor(corpus, "travel:sen4", 0.9), anchor(corpus, "travel:sen0", 0.7), other, passage,
           anchor(corpus, "travel:sen6", 0.95)]
    state, ctx = corpus.run(SentenceWindow(SentenceWindow.Params(display="chunk")), evs)
    # in the order of each chunk's first evidence
    assert [e.id for e in state.evidence] == ["travel:chk1", "travel:chk0", "x"]
    chk0 = state.evidence[1]
    assert chk0.score == pytest.approx(0.8) and [a["id"] for a in chk0.metadata["anchors"]] == ["travel:sen0"]
    chk1 = next(e for e in state.evidence if e.id == "travel:chk1")
    assert chk1.kind == "chunk" and chk1.metadata["display"] == "chunk"
    assert chk1.text == corpus.nodes["travel:chk1"].props["text"]  # the whole passage, verbatim
    assert "Receipts must be submitted" in chk1.text and "audits declarations" in chk1.text
    assert [a["id"] for a in chk1.metadata["anchors"]] == ["travel:sen4", "travel:sen6"]
    assert chk1.score == pytest.approx(0.95)  # its best sentence
    assert ctx.stats["chunks"] == 2 and ctx.stats["sentences_in"] == 3 and ctx.stats["kept_as_is"] == 1
