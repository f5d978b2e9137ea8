"""token_budget, extractive and negative_detection on hand-made evidence."""

from __future__ import annotations

import re
from typing import Any

import pytest
from graphroute.core.api.constants import NOT_FOUND
from graphroute.core.api.models import Evidence
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.plugins.denoisers.context import (
    TokenBudget,
    approx_tokens,
    block_tokens,
    format_block,
    strip_internal_tags,
)
from graphroute.plugins.synthesizers.builtin import (
    Extractive,
    NegativeDetection,
    content_terms,
    sentence_spans,
)
from hypothesis import given
from hypothesis import strategies as st


def _ctx() -> StageContext:
    # These stages never touch services; a stage that did would fail loudly on None.
    return StageContext(services=None, stage_id="t")  # type: ignore[arg-type]


def _ev(i: int, text: str, score: float, **kw: Any) -> Evidence:
    return Evidence(
        id=f"e{i}", text=text, score=score, document=kw.pop("document", f"Doc {i}"),
        document_id=f"d{i}", section_path=kw.pop("section_path", "Intro / Terms"), **kw,
    )


EVIDENCE = [
    _ev(1, "The agent fee is 15% of gross revenue [paragraph, sim=0.751, doc=abc]. It is paid monthly.", 0.9,
        char_offset=100, char_length=80),
    _ev(2, "[Skeleton: Section 4] Warranty claims must be filed within 30 days.", 0.5),
    _ev(3, "The office is in Seattle. Parking is free on weekends.", 0.7),
]


def _budget(state: QueryState, **params: Any) -> StageContext:
    ctx = _ctx()
    TokenBudget(TokenBudget.Params(**params)).run(state, ctx)
    return ctx


def test_strip_internal_tags_keeps_citations_and_brackets() -> None:
    text = "Fee is 15% [paragraph, sim=0.751, doc=x] [Skeleton-B: s2] as stated [1] in [Annex A]."
    out = strip_internal_tags(text)
    assert "sim=" not in out and "Skeleton" not in out
    assert "[1]" in out and "[Annex A]" in out
    assert out == "Fee is 15% as stated [1] in [Annex A]."
    assert strip_internal_tags("[Document: Lease | Section: Fees] Rent is due.") == "Rent is due."


def test_approx_tokens_counts_words_and_punctuation() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("Hello, world!") == 4
    assert approx_tokens("a " * 50) == 50


@given(
    text=st.text(min_size=1),
    document=st.text(),
    section=st.text(),
    page=st.none() | st.integers(0, 10_000),
    n=st.integers(1, 10_000),
)
def test_a_blocks_tokens_are_its_parts_counted_apart(text: str, document: str, section: str, page: int | None, n: int) -> None:
    ev = _ev(1, text, 0.5, document=document, section_path=section, page=page)
    assert block_tokens(text, ev) == approx_tokens(format_block(n, text, ev))


def test_token_budget_orders_numbers_and_strips() -> None:
    state = QueryState(question="What is the agent fee?", group="g", evidence=list(EVIDENCE))
    ctx = _budget(state)
    blocks = re.findall(r"^\[(\d+)\] ", state.context, flags=re.M)
    assert blocks == ["1", "2", "3"]
    # highest score first: e1 (0.9), e3 (0.7), e2 (0.5)
    assert [e.id for e in state.context_evidence] == ["e1", "e3", "e2"]
    assert "sim=" not in state.context and "Skeleton" not in state.context
    assert "Source: Doc 1 > Intro / Terms" in state.context
    assert ctx.stats["chunks_in"] == 3 and ctx.stats["chunks_used"] == 3
    assert ctx.stats["context_tokens"] == approx_tokens(state.context.replace("\n\n", " "))
    assert 0 < ctx.stats["budget_utilisation"] < 0.01
    # evidence text handed on is clean, and flagged when stripping moved offsets
    assert state.context_evidence[0].metadata.get("text_stripped") is True
    assert "text_stripped" not in state.context_evidence[1].metadata


def test_token_budget_respects_budget() -> None:
    state = QueryState(question="q", group="g", evidence=list(EVIDENCE))
    full = _budget(state).stats["context_tokens"]
    small = QueryState(question="q", group="g", evidence=list(EVIDENCE))
    ctx = _budget(small, max_tokens=full - 1)
    assert ctx.stats["context_tokens"] <= full - 1
    assert ctx.stats["chunks_used"] < 3
    assert ctx.stats["skipped_budget"] >= 1
    capped = QueryState(question="q", group="g", evidence=list(EVIDENCE))
    assert _budget(capped, max_chunks=1).stats["chunks_used"] == 1


def test_token_budget_rejects_bad_params() -> None:
    with pytest.raises(ValueError):
        TokenBudget.Params(max_tokens=0)


def test_sentence_spans_keep_abbreviations() -> None:
    text = "Contoso Ltd. is at P.O. Box 123, FL. Dr. Smith signed it. Fees apply!"
    sents = [text[s:e] for s, e in sentence_spans(text)]
    assert sents == ["Contoso Ltd. is at P.O. Box 123, FL.", "Dr. Smith signed it.", "Fees apply!"]


def test_content_terms_are_normalised_words_without_stopwords() -> None:
    terms = content_terms("The Smiths’ cities and the city's libraries: who owns Ruth's 3 glass-works?")
    assert terms == frozenset({"smith", "city", "library", "own", "ruth", "3", "glass", "work"})
    assert content_terms("What is the and of it?") == frozenset()


def test_extractive_answers_with_mapped_citations() -> None:
    state = QueryState(question="What is the agent fee?", group="g", evidence=list(EVIDENCE))
    _budget(state)
    ctx = _ctx()
    Extractive().run(state, ctx)
    assert not state.negative
    assert state.answer.startswith("The agent fee is 15% of gross revenue.")
    assert "sim=" not in state.answer
    markers = {int(m) for m in re.findall(r"\[(\d+)\]", state.answer)}
    assert markers == {c.index for c in state.citations}
    c = next(c for c in state.citations if c.index == 1)
    assert c.evidence_id == "e1" and c.document == "Doc 1" and c.section_path == "Intro / Terms"
    assert "agent fee" in c.text
    # the evidence text was stripped, so the evidence-level offsets are kept unchanged
    assert c.char_offset == 100


def test_extractive_narrows_offsets_to_sentence() -> None:
    ev = _ev(1, "Parking is free. The agent fee is 15%.", 1.0, char_offset=1000, char_length=38)
    state = QueryState(question="agent fee?", group="g", evidence=[ev])
    _budget(state)
    Extractive(Extractive.Params(max_sentences=1)).run(state, _ctx())
    (c,) = state.citations
    assert c.text == "The agent fee is 15%."
    assert c.char_offset == 1000 + ev.text.index("The agent")
    assert c.char_length == len("The agent fee is 15%.")


def test_extractive_empty_context_is_negative() -> None:
    state = QueryState(question="What is the agent fee?", group="g", evidence=[])
    _budget(state)
    ctx = _ctx()
    Extractive().run(state, ctx)
    assert state.answer == NOT_FOUND and state.negative and state.citations == []
    assert ctx.stats["negative_reason"] == "no_evidence"


def test_extractive_floor() -> None:
    state = QueryState(question="What is the agent fee?", group="g", evidence=list(EVIDENCE))
    _budget(state)
    Extractive(Extractive.Params(min_score=0.95)).run(state, ctx := _ctx())
    assert state.negative and state.answer == NOT_FOUND
    assert ctx.stats["negative_reason"] == "below_min_score"
    state2 = QueryState(question="Who won the 1998 chess olympiad?", group="g", evidence=list(EVIDENCE))
    _budget(state2)
    Extractive(Extractive.Params(min_query_overlap=0.5)).run(state2, ctx2 := _ctx())
    assert state2.negative and ctx2.stats["negative_reason"] == "below_min_query_overlap"


def test_negative_detection_stage_then_synthesizer_respects_it() -> None:
    state = QueryState(question="What is the agent fee?", group="g", evidence=list(EVIDENCE))
    _budget(state)
    ctx = _ctx()
    NegativeDetection(NegativeDetection.Params(min_score=2.0)).run(state, ctx)
    assert state.negative and state.answer == NOT_FOUND and state.context == ""
    ctx2 = _ctx()
    Extractive().run(state, ctx2)
    assert state.answer == NOT_FOUND and ctx2.stats["skipped"]
    # below the floor it lets the synthesizer answer
    ok = QueryState(question="What is the agent fee?", group="g", evidence=list(EVIDENCE))
    _budget(ok)
    NegativeDetection(NegativeDetection.Params(min_score=0.5)).run(ok, ctx3 := _ctx())
    assert not ok.negative and ctx3.stats["negative"] is False and ok.context
