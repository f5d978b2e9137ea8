"""Context assembly: the numbered, cited text a synthesizer is given.

``token_budget`` turns ranked evidence into ``state.context`` (numbered blocks ``[n] text``
with a plain source line) and ``state.context_evidence`` (the evidence behind block ``n`` is
``context_evidence[n - 1]``, so a ``[n]`` in the answer maps back to a citation).

Two lessons of the predecessor are built in (skeleton-architecture "Known Issues"): retrieval
metadata never goes inline (smaller models copied ``[paragraph, sim=0.751, doc=...]`` into
answers), so internal tags are stripped from the text; and the budget is counted with a
tokenizer-free approximation so nothing is downloaded at run time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from graphroute.core.api.models import Evidence
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.hookspecs import hookimpl
from pydantic import Field

# `[Skeleton: ...]`, `[Skeleton-B: ...]` and the index-time label prefix
# `[Document: <title> | Section: <path>]` (embedded text only, but never let it through).
_LABEL_TAG_RE = re.compile(r"\[\s*(?:Skeleton(?:-[A-Za-z0-9]+)?|Document|Section)\s*:[^\[\]]*\]")
# Retrieval annotations such as `[paragraph, sim=0.751, doc=...]` or `[score=0.4]`: a bracket
# holding at least one `key=value` pair with a known metadata key.
_ANNOTATION_RE = re.compile(
    r"\[[^\[\]]*?\b(?:sim|similarity|score|doc|doc_id|rank|chunk|chunk_id|source|conf|"
    r"confidence|section|page|kind|entity)\s*=[^\[\]]*\]",
    re.IGNORECASE,
)
_SPACES_RE = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_PUNCT_RE = re.compile(r"[ \t]+([.,;:!?])")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


@lru_cache(maxsize=1 << 14)  # every evidence text, every question; pure
def strip_internal_tags(text: str) -> str:
    """Remove retrieval/skeleton annotations from text meant for a prompt or an answer.

    Citation markers such as ``[1]`` and ordinary bracketed words are kept: only tags with a
    known label (``Skeleton:``) or ``key=value`` metadata are removed.
    """
    out = _LABEL_TAG_RE.sub("", text)
    out = _ANNOTATION_RE.sub("", out)
    out = _SPACE_BEFORE_PUNCT_RE.sub(r"\1", out)
    out = _SPACES_RE.sub(" ", out)
    return "\n".join(line.strip() for line in out.splitlines()).strip()


def approx_tokens(text: str) -> int:
    """Approximate LLM token count: words and punctuation marks counted separately.

    For English prose this lands within ~15% of BPE tokenizers (which split long words but
    merge a leading space into the word), which is precise enough for a budget that is
    usually used at a third of its size, and needs no tokenizer download.

    No token spans whitespace, so the count of texts joined by whitespace is the sum of
    their counts: :func:`block_tokens` relies on it.
    """
    return len(_TOKEN_RE.findall(text))


@lru_cache(maxsize=1 << 14)  # evidence texts and source lines recur from question to question
def _text_tokens(text: str) -> int:
    return approx_tokens(text)


def block_tokens(text: str, ev: Evidence) -> int:
    """``approx_tokens(format_block(n, text, ev))`` for any ``n``, without tokenising the
    block again: the marker ``[n]`` is three tokens, and the text and the source line are
    counted once per distinct string. Counting every block afresh would be most of
    ``token_budget``'s time."""
    return 3 + _text_tokens(text) + _text_tokens(source_line(ev))


def source_line(ev: Evidence) -> str:
    """The plain "where from" line of a context block: document title and section path."""
    parts = [p for p in (ev.document.strip(), ev.section_path.strip()) if p]
    where = " > ".join(parts) if parts else (ev.document_id or "unknown document")
    if ev.page is not None:
        where += f" (page {ev.page})"
    return f"Source: {where}"


def format_block(n: int, text: str, ev: Evidence) -> str:
    return f"[{n}] {text}\n{source_line(ev)}"


def assemble_context(
    evidence: Sequence[Evidence],
    *,
    budget: int,
    max_blocks: int | None = None,
) -> tuple[str, list[Evidence], dict[str, int]]:
    """Pack evidence, best score first, into numbered blocks within ``budget`` tokens.

    A block that does not fit is skipped (a smaller later one may still fit); nothing is
    truncated mid-text, so a citation always points at whole evidence.
    """
    ranked = sorted(evidence, key=lambda e: -e.score)
    blocks: list[str] = []
    used: list[Evidence] = []
    tokens = 0
    skipped_budget = 0
    skipped_empty = 0
    for ev in ranked:
        if max_blocks is not None and len(used) >= max_blocks:
            break
        clean = strip_internal_tags(ev.text)
        if not clean:
            skipped_empty += 1
            continue
        cost = block_tokens(clean, ev)
        if tokens + cost > budget:
            skipped_budget += 1
            continue
        blocks.append(format_block(len(used) + 1, clean, ev))
        update: dict[str, object] = {"text": clean}
        if clean != ev.text:  # offsets inside the text no longer match the document
            update["metadata"] = {**ev.metadata, "text_stripped": True}
        used.append(ev.model_copy(update=update))
        tokens += cost
    stats = {"skipped_budget": skipped_budget, "skipped_empty": skipped_empty, "tokens": tokens}
    return "\n\n".join(blocks), used, stats


class TokenBudget(Stage):
    """Build the numbered, cited context (tags stripped) within a token budget."""

    name = "token_budget"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.CONTEXT,)

    class Params(StageParams):
        max_tokens: int = Field(
            32000, ge=1, le=2_000_000,
            description="Context budget in approximate tokens (words + punctuation); route2 default 32k.",
        )
        max_chunks: int | None = Field(
            None, ge=1, description="Optional cap on the number of context blocks (None: budget only)."
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        context, used, info = assemble_context(
            state.evidence, budget=self.params.max_tokens, max_blocks=self.params.max_chunks
        )
        state.context = context
        state.context_evidence = used
        ctx.stats.update(
            {
                "chunks_in": len(state.evidence),
                "chunks_used": len(used),
                "context_tokens": info["tokens"],
                "budget_utilisation": round(info["tokens"] / self.params.max_tokens, 4),
                "skipped_budget": info["skipped_budget"],
                "skipped_empty": info["skipped_empty"],
            }
        )


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [TokenBudget]
