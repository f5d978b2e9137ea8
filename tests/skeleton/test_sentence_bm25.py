"""BM25 over sentences (`bm25` with `unit: sentence`) and its place in route1s_sentence, on the
hand-built corpus (real store, real bm25s, real embedder)."""

from __future__ import annotations

from graphroute.core.config.overrides import Overrides
from graphroute.core.config.resolve import load_route
from graphroute.core.query.runner import run_route
from graphroute.core.registry import get_registry
from graphroute.plugins.baselines.lexical import BM25Search

from .conftest import Corpus


def test_sentence_unit_returns_anchor_sentences_that_share_a_word_best_first(corpus: Corpus) -> None:
    stage = BM25Search(BM25Search.Params(unit="sentence", top_k=5))
    state, ctx = corpus.run(stage, question="Who audits declarations?")
    # a sentence without any of the question's words is no hit, whatever top_k allows
    assert [e.id for e in state.evidence] == ["travel:sen6"]
    top, node = state.evidence[0], corpus.sentence("travel:sen6")
    assert top.kind == "sentence" and top.source == "bm25" and top.metadata["role"] == "anchor"
    assert top.metadata["parent_paragraph_text"] == node.props["parent_paragraph_text"]
    assert top.document == "Travel Policy" and top.chunk_id == "travel:chk1"
    assert top.char_offset == node.props["chunk_char_offset"]  # cited in the chunk frame
    assert ctx.stats["indexed_sentences"] == sum(1 for n in corpus.nodes.values() if n.label == "Sentence")


def test_sentences_rank_by_words_shared_and_chunks_stay_chunks(corpus: Corpus) -> None:
    sentences, _ = corpus.run(BM25Search(BM25Search.Params(unit="sentence", top_k=3)), question="lost receipts")
    chunks, _ = corpus.run(BM25Search(BM25Search.Params(top_k=3)), question="lost receipts")
    # the sentence with both words first, then the two that say "receipts" only
    assert sentences.evidence[0].id == "travel:sen5"
    assert {e.id for e in sentences.evidence} == {"travel:sen3", "travel:sen4", "travel:sen5"}
    scores = [e.score for e in sentences.evidence]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1]
    assert {e.kind for e in sentences.evidence} == {"sentence"}
    assert chunks.evidence[0].id == "travel:chk1" and {e.kind for e in chunks.evidence} == {"chunk"}


def test_route1s_fuses_sentence_vectors_and_bm25_sentences_by_rank(corpus: Corpus) -> None:
    """The default sentence route shows a passage found by words alone, and a passage whose
    sentence both searches rank first comes before one that only one search finds."""
    route = load_route(
        "route1s_sentence", get_registry(), overrides=Overrides({}, {"negative_detection": False})
    )
    question = "Who audits the declarations?"
    result = run_route(route, question, corpus.services)
    lexical = next(t for t in result.trace if t.stage == "sentence_bm25")
    assert lexical.stats["hits"] >= 1
    assert result.ranking[0] == "travel"
    first = result.evidence[0]
    assert first.kind == "chunk" and "audits declarations" in first.text
    # the fused score of a sentence that heads both lists is the sum of two 1/(60+1)
    anchor = first.metadata["anchors"][0]
    assert anchor["id"] == "travel:sen6" and abs(anchor["score"] - 2 / 61) < 1e-9
