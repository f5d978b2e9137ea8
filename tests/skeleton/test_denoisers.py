"""Rules of the skeleton denoisers: confidence gate, coherence bonus, pruning, keyword rerank."""

from __future__ import annotations

from typing import Any

import pytest
from graphroute.core.api.models import Evidence
from graphroute.plugins.denoisers.skeleton import (
    ConfidenceGate,
    KeywordOverlap,
    StructuralCoherence,
    StructuralPrune,
)
from graphroute.plugins.expanders.vector import SentenceWindow, sentence_evidence

from .conftest import Corpus


def anchor(corpus: Corpus, sid: str, score: float) -> Evidence:
    return sentence_evidence(corpus.sentence(sid), score, source="vector_anchors", role="anchor")


def ev(eid: str, text: str, score: float, doc: str = "d", **kw: Any) -> Evidence:
    return Evidence(id=eid, text=text, score=score, document=doc, document_id=doc, **kw)


# --------------------------------------------------------------------------- confidence_gate


def test_confidence_gate_drops_sentences_below_the_floor(corpus: Corpus) -> None:
    evs = [
        anchor(corpus, "security:sen1", 0.9),  # confidence 0.3
        anchor(corpus, "security:sen0", 0.8),  # confidence 1.0
        ev("c", "a chunk without confidence", 0.5, kind="chunk"),
        ev("edge", "exactly at the floor", 0.4, kind="sentence", metadata={"confidence": 0.5}),
    ]
    state, ctx = corpus.run(ConfidenceGate(), evs)
    assert [e.id for e in state.evidence] == ["security:sen0", "c", "edge"]
    assert ctx.stats["dropped"] == 1
    state, _ = corpus.run(ConfidenceGate(ConfidenceGate.Params(min_confidence=0.2)), evs)
    assert len(state.evidence) == 4


def test_confidence_gate_on_displayed_paragraphs_gates_each_anchor(corpus: Corpus) -> None:
    # security:par0 holds sen0 (conf 1.0) and sen1 (conf 0.3)
    shown, _ = corpus.run(SentenceWindow(SentenceWindow.Params(window=0)), [anchor(corpus, "security:sen1", 0.9), anchor(corpus, "security:sen0", 0.6)])
    assert shown.evidence[0].score == 0.9
    state, ctx = corpus.run(ConfidenceGate(), shown.evidence)
    (par,) = state.evidence
    assert [a["id"] for a in par.metadata["anchors"]] == ["security:sen0"]
    assert par.score == 0.6  # rescored by the reliable anchor that still supports it
    assert ctx.stats["anchors_dropped"] == 1 and ctx.stats["dropped"] == 0
    # a paragraph supported only by unreliable sentences is dropped
    only_bad, _ = corpus.run(SentenceWindow(SentenceWindow.Params(window=0)), [anchor(corpus, "security:sen1", 0.9)])
    state, ctx = corpus.run(ConfidenceGate(), only_bad.evidence)
    assert state.evidence == [] and ctx.stats["dropped"] == 1


# --------------------------------------------------------------------------- structural_coherence


def test_coherence_bonus_for_anchors_in_one_paragraph_is_relative_to_the_best_score(corpus: Corpus) -> None:
    evs = [anchor(corpus, "travel:sen4", 0.50), anchor(corpus, "travel:sen6", 0.45), anchor(corpus, "travel:sen0", 0.60)]
    shown, _ = corpus.run(SentenceWindow(SentenceWindow.Params(window=0)), evs)
    state, ctx = corpus.run(StructuralCoherence(), shown.evidence)
    by_id = {e.id: e for e in state.evidence}
    assert by_id["travel:par3"].score == pytest.approx(0.50 + 1.5 * 0.60)
    assert by_id["travel:par0"].score == pytest.approx(0.60)  # single anchor: no bonus
    assert [e.id for e in state.evidence] == ["travel:par3", "travel:par0"]
    assert ctx.stats["boosted"] == 1 and ctx.stats["clusters"] == 1
    assert ctx.stats["bonus"] == pytest.approx(0.9)


def test_coherence_absolute_bonus_and_min_anchors(corpus: Corpus) -> None:
    evs = [anchor(corpus, "travel:sen4", 0.5), anchor(corpus, "travel:sen6", 0.4)]
    state, _ = corpus.run(StructuralCoherence(StructuralCoherence.Params(relative=False)), evs)
    assert sorted(e.score for e in state.evidence) == pytest.approx([0.4 + 1.5, 0.5 + 1.5])
    state, ctx = corpus.run(StructuralCoherence(StructuralCoherence.Params(min_anchors=3)), evs)
    assert sorted(e.score for e in state.evidence) == [0.4, 0.5]
    assert ctx.stats["boosted"] == 0


def test_consecutive_anchors_cluster_across_a_paragraph_boundary(corpus: Corpus) -> None:
    # travel:sen1 (end of par0) and travel:sen2 (par1) are reading-order neighbours
    evs = [anchor(corpus, "travel:sen1", 0.5), anchor(corpus, "travel:sen2", 0.4), anchor(corpus, "security:sen2", 0.45)]
    state, _ = corpus.run(StructuralCoherence(), evs)
    by_id = {e.id: e for e in state.evidence}
    assert by_id["travel:sen1"].metadata.get("cluster_size") == 2
    assert by_id["travel:sen2"].score == pytest.approx(0.4 + 1.5 * 0.5)
    assert by_id["security:sen2"].score == 0.45
    state, _ = corpus.run(StructuralCoherence(StructuralCoherence.Params(consecutive=False)), evs)
    assert {e.id: e.score for e in state.evidence}["travel:sen2"] == 0.4


# --------------------------------------------------------------------------- structural_prune


def test_prune_drops_exact_duplicates_keeping_the_better_score(corpus: Corpus) -> None:
    evs = [ev("a", "The cap is 150 euros.", 0.4), ev("b", "the cap is  150 euros.", 0.7), ev("c", "Other text.", 0.5)]
    state, ctx = corpus.run(StructuralPrune(StructuralPrune.Params(order="score")), evs)
    assert [(e.id, e.score) for e in state.evidence] == [("b", 0.7), ("c", 0.5)]
    assert ctx.stats["exact_duplicates"] == 1


def test_prune_removes_substrings_and_the_container_keeps_the_best_score(corpus: Corpus) -> None:
    para = ev("par", "Receipts are due in 30 days. Late ones need a director.", 0.5, kind="paragraph")
    sent = ev("sen", "Late ones need a director.", 0.8, kind="sentence")
    other = ev("x", "Something else entirely.", 0.6)
    state, ctx = corpus.run(StructuralPrune(StructuralPrune.Params(order="score")), [sent, other, para])
    assert [(e.id, e.score) for e in state.evidence] == [("par", 0.8), ("x", 0.6)]
    assert state.evidence[0].metadata["absorbed"] == ["sen"]
    assert ctx.stats["substring_duplicates"] == 1
    state, _ = corpus.run(StructuralPrune(StructuralPrune.Params(order="score", substrings=False)), [sent, other, para])
    assert len(state.evidence) == 3


def test_prune_caps_records_per_document_best_first(corpus: Corpus) -> None:
    evs = [ev(f"a{i}", f"text a{i}", 0.9 - i / 10, doc="A") for i in range(4)] + [ev("b0", "text b0", 0.1, doc="B")]
    state, ctx = corpus.run(StructuralPrune(StructuralPrune.Params(max_per_document=2, order="score")), evs)
    assert [e.id for e in state.evidence] == ["a0", "a1", "b0"]
    assert ctx.stats["capped"] == 2


def test_prune_reading_order_documents_by_best_score_then_chunk_and_offset(corpus: Corpus) -> None:
    # security's best record outranks travel's; inside travel, chunk 0 precedes chunk 1
    evs = [
        anchor(corpus, "travel:sen5", 0.70),  # chunk 1
        anchor(corpus, "security:sen2", 0.95),
        anchor(corpus, "travel:sen2", 0.60),  # chunk 0, offset after sen0
        anchor(corpus, "security:sen0", 0.50),
        anchor(corpus, "travel:sen0", 0.40),  # chunk 0, offset 0
    ]
    state, _ = corpus.run(StructuralPrune(StructuralPrune.Params(order="reading", max_per_document=None)), evs)
    assert [e.id for e in state.evidence] == ["security:sen0", "security:sen2", "travel:sen0", "travel:sen2", "travel:sen5"]
    state, _ = corpus.run(StructuralPrune(StructuralPrune.Params(order="score", max_per_document=None)), evs)
    assert [e.id for e in state.evidence] == ["security:sen2", "travel:sen5", "travel:sen2", "security:sen0", "travel:sen0"]
    state, _ = corpus.run(StructuralPrune(StructuralPrune.Params(order="input", max_per_document=None)), evs)
    assert [e.id for e in state.evidence] == [e.id for e in evs]


# --------------------------------------------------------------------------- keyword_overlap


def test_keyword_overlap_breaks_near_ties_by_query_term_coverage(corpus: Corpus) -> None:
    q = "Who signs late receipts?"
    evs = [
        ev("vague", "Expenses are handled by the finance department.", 0.62),
        ev("match", "Late receipts are signed by a director.", 0.60),
    ]
    state, ctx = corpus.run(KeywordOverlap(), evs, question=q)
    assert [e.id for e in state.evidence] == ["match", "vague"]
    assert ctx.stats["reordered"] == 2
    match = state.evidence[0]
    overlap = match.metadata["keyword_overlap"]
    assert overlap > 0
    assert match.score == pytest.approx(0.7 * 0.60 / 0.62 + 0.3 * overlap, abs=1e-4)


def test_keyword_overlap_weight_bounds(corpus: Corpus) -> None:
    q = "Who signs late receipts?"
    evs = [ev("vague", "Expenses are handled by finance.", 0.9), ev("match", "Late receipts are signed by a director.", 0.3)]
    state, _ = corpus.run(KeywordOverlap(KeywordOverlap.Params(weight=0.0)), evs, question=q)
    assert [e.id for e in state.evidence] == ["vague", "match"]
    assert state.evidence[1].score == pytest.approx(0.3 / 0.9)
    state, _ = corpus.run(KeywordOverlap(KeywordOverlap.Params(weight=1.0)), evs, question=q)
    assert [e.id for e in state.evidence] == ["match", "vague"]
    assert state.evidence[1].score == 0.0  # no query term in it


def test_params_are_validated() -> None:
    with pytest.raises(ValueError):
        ConfidenceGate.Params(min_confidence=1.5)
    with pytest.raises(ValueError):
        KeywordOverlap.Params(weight=2)
    with pytest.raises(ValueError):
        StructuralPrune.Params(order="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        StructuralCoherence.Params(min_anchors=1)
