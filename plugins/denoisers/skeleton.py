"""Skeleton denoisers: the offline re-ranking of the skeleton reference (design consideration 4).

At sentence level the reference needed no external reranker (answers were at vector rank 1),
only four cheap, deterministic controls, in route order:

* ``confidence_gate`` - drop sentences whose extraction confidence is below 0.5 (OCR debris,
  half table cells, form labels); unknown confidence counts as 1.0, as in the reference.
* ``structural_coherence`` - bonus for anchors that cluster (same paragraph or consecutive):
  several independent hits in one place corroborate each other.
* ``structural_prune`` - drop exact and substring duplicates, cap evidence per document,
  order by reading order (or keep score order, which Recall@k wants).
* ``keyword_overlap`` - blend the retrieval score with the share of query terms present.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal

from graphroute.core.api.models import Evidence
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.hookspecs import hookimpl
from pydantic import Field

_SPACE_RE = re.compile(r"\s+")


def _confidence(value: Any) -> float:
    """Extraction confidence; missing means trusted (the reference's ``get("confidence", 1.0)``)."""
    if value is None:
        return 1.0
    try:
        return float(value)
    except (TypeError, ValueError):
        return 1.0


def _anchor_list(ev: Evidence) -> list[dict[str, Any]] | None:
    anchors = ev.metadata.get("anchors")
    if isinstance(anchors, list) and anchors and all(isinstance(a, dict) for a in anchors):
        return anchors
    return None


# --------------------------------------------------------------------------- confidence gate


class ConfidenceGate(Stage):
    """Drop sentences whose extraction confidence is below a floor (default 0.5)."""

    name = "confidence_gate"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        min_confidence: float = Field(
            0.5, ge=0.0, le=1.0,
            description="Sentences below this extraction confidence are dropped (reference floor 0.5). "
            "Evidence without a confidence is kept.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        floor = self.params.min_confidence
        kept: list[Evidence] = []
        dropped = anchors_dropped = 0
        for ev in state.evidence:
            anchors = _anchor_list(ev)
            if anchors is not None:
                # a displayed paragraph: gate each supporting sentence, keep the paragraph
                # while one reliable sentence still supports it, rescored by its best one
                good = [a for a in anchors if _confidence(a.get("confidence")) >= floor]
                anchors_dropped += len(anchors) - len(good)
                if not good:
                    dropped += 1
                    continue
                if len(good) < len(anchors):
                    meta = {**ev.metadata, "anchors": good, "anchor_count": len(good)}
                    best = max(float(a.get("score", ev.score)) for a in good)
                    bonus = float(ev.metadata.get("coherence_bonus", 0.0))
                    ev = ev.model_copy(update={"metadata": meta, "score": best + bonus})
                kept.append(ev)
            elif _confidence(ev.metadata.get("confidence")) < floor:
                dropped += 1
            else:
                kept.append(ev)
        state.evidence = kept
        ctx.stats.update({"dropped": dropped, "anchors_dropped": anchors_dropped, "kept": len(kept)})


# --------------------------------------------------------------------------- coherence


class _Clusters:
    """Union-find over anchor sentence ids."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def add(self, x: str) -> None:
        self.parent.setdefault(x, x)

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


class StructuralCoherence(Stage):
    """Bonus for evidence whose anchors cluster (same paragraph or consecutive sentences)."""

    name = "structural_coherence"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        bonus: float = Field(
            1.5, ge=0.0, le=100.0,
            description="Bonus for clustered anchors (reference +1.5). With relative=true it is "
            "in units of the pool's best score: the reference added +1.5 on a similarity scale "
            "whose best hit is about 1, which lifts a clustered paragraph above every unclustered "
            "one; scaling by the best score keeps exactly that effect for any embedder's cosine range.",
        )
        relative: bool = Field(
            True, description="Bonus x best score in the pool (true) or an absolute bonus (false)."
        )
        min_anchors: int = Field(
            2, ge=2, le=100, description="Anchors a cluster needs to earn the bonus."
        )
        consecutive: bool = Field(
            True,
            description="Anchors that are reading-order neighbours (prev/next) cluster too, not only "
            "anchors of one paragraph (reference: 'same paragraph or consecutive').",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        members = self._anchors_of(state.evidence)
        clusters = _Clusters()
        paragraph_of: dict[str, str] = {}
        links: dict[str, tuple[Any, Any]] = {}
        for ev_anchors in members:
            for aid, info in ev_anchors.items():
                clusters.add(aid)
                pid = info.get("parent_paragraph_id")
                if pid:
                    if pid in paragraph_of:
                        clusters.union(paragraph_of[pid], aid)
                    else:
                        paragraph_of[pid] = aid
                links[aid] = (info.get("prev_sentence_id"), info.get("next_sentence_id"))
        if self.params.consecutive:
            for aid, (prev, nxt) in links.items():
                for other in (prev, nxt):
                    if other in clusters.parent:
                        clusters.union(aid, other)
        size: dict[str, int] = {}
        for aid in clusters.parent:
            root = clusters.find(aid)
            size[root] = size.get(root, 0) + 1

        top = max((e.score for e in state.evidence), default=0.0)
        unit = max(top, 0.0) if self.params.relative else 1.0
        bonus = self.params.bonus * unit
        out: list[Evidence] = []
        boosted = 0
        for ev, ev_anchors in zip(state.evidence, members, strict=True):
            biggest = max((size[clusters.find(a)] for a in ev_anchors), default=0)
            if biggest >= self.params.min_anchors and bonus > 0:
                meta = {**ev.metadata, "coherence_bonus": bonus, "cluster_size": biggest}
                ev = ev.model_copy(update={"score": ev.score + bonus, "metadata": meta})
                boosted += 1
            out.append(ev)
        out.sort(key=lambda e: -e.score)
        state.evidence = out
        ctx.stats.update(
            {
                "anchors": len(clusters.parent),
                "clusters": sum(1 for n in size.values() if n >= self.params.min_anchors),
                "boosted": boosted,
                "bonus": round(bonus, 6),
            }
        )

    @staticmethod
    def _anchors_of(evidence: list[Evidence]) -> list[dict[str, dict[str, Any]]]:
        """Per evidence: its anchor sentences (id -> paragraph and neighbour ids)."""
        out: list[dict[str, dict[str, Any]]] = []
        for ev in evidence:
            anchors = _anchor_list(ev)
            if anchors is not None:  # a displayed paragraph holding one or more anchors
                pid = ev.metadata.get("parent_paragraph_id") or (ev.id if ev.kind == "paragraph" else None)
                out.append(
                    {
                        str(a["id"]): {
                            "parent_paragraph_id": pid,
                            "prev_sentence_id": a.get("prev_sentence_id"),
                            "next_sentence_id": a.get("next_sentence_id"),
                        }
                        for a in anchors
                        if a.get("id")
                    }
                )
            elif ev.kind == "sentence" and ev.metadata.get("role", "anchor") == "anchor":
                out.append({ev.id: dict(ev.metadata)})
            else:
                out.append({})
        return out


# --------------------------------------------------------------------------- pruning


@lru_cache(maxsize=1 << 14)  # evidence texts recur between questions; pure
def _norm_text(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip().casefold()


class StructuralPrune(Stage):
    """Drop exact and substring duplicates, cap evidence per document, order by reading order."""

    name = "structural_prune"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        substrings: bool = Field(
            True,
            description="Drop evidence whose text is contained in another's; the container keeps "
            "the better of the two scores, so no ranking signal is lost.",
        )
        max_per_document: int | None = Field(
            4, ge=1, le=1000,
            description="At most this many records per document, best first (None: no cap). 4 is "
            "half the default anchor budget (8), so one document cannot take the whole context.",
        )
        order: Literal["reading", "score", "input"] = Field(
            "reading",
            description="reading: documents by their best score, records in document reading order "
            "(reference, for the LLM's coherence); score: best first (what Recall@k measures); "
            "input: keep the incoming order.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        # (input position, evidence); longest first, so a container is kept before the texts
        # it contains; among equal texts the better score is kept
        items = list(enumerate(state.evidence))
        items.sort(key=lambda t: (-len(_norm_text(t[1].text)), -t[1].score, t[0]))
        kept: list[tuple[int, Evidence]] = []
        kept_norm: list[str] = []
        exact = substring = 0
        for pos, ev in items:
            norm = _norm_text(ev.text)
            host = None
            for k, text in enumerate(kept_norm):
                if norm == text:
                    host, exact = k, exact + 1
                    break
                if self.params.substrings and norm and norm in text:
                    host, substring = k, substring + 1
                    break
            if host is None:
                kept.append((pos, ev))
                kept_norm.append(norm)
                continue
            hpos, h = kept[host]
            update: dict[str, Any] = {"metadata": {**h.metadata, "absorbed": [*h.metadata.get("absorbed", []), ev.id]}}
            if ev.score > h.score:
                update["score"] = ev.score
            kept[host] = (min(hpos, pos), h.model_copy(update=update))

        ranked = sorted(kept, key=lambda t: (-t[1].score, t[0]))
        capped = 0
        if self.params.max_per_document is not None:
            per_doc: dict[str, int] = {}
            out = []
            for pos, ev in ranked:
                key = ev.document_id or ev.document
                per_doc[key] = per_doc.get(key, 0) + 1
                if per_doc[key] > self.params.max_per_document:
                    capped += 1
                    continue
                out.append((pos, ev))
            ranked = out
        state.evidence = self._ordered(ranked, self._chunk_order(ctx, ranked) if self.params.order == "reading" else {})
        ctx.stats.update(
            {
                "exact_duplicates": exact,
                "substring_duplicates": substring,
                "capped": capped,
                "kept": len(state.evidence),
                "order": self.params.order,
            }
        )

    @staticmethod
    def _chunk_order(ctx: StageContext, ranked: list[tuple[int, Evidence]]) -> dict[str, int]:
        """Chunk id -> its index in the document (reading order of chunks), one store read."""
        order: dict[str, int] = {}
        missing: list[str] = []
        for _, ev in ranked:
            idx = ev.metadata.get("chunk_index")
            if ev.chunk_id and isinstance(idx, int):
                order[ev.chunk_id] = idx
            elif ev.chunk_id and ev.chunk_id not in missing:
                missing.append(ev.chunk_id)
        if missing:
            for node in ctx.services.store.get_nodes(ctx.group, missing):
                idx = node.props.get("index")
                if isinstance(idx, int):
                    order[node.id] = idx
        return order

    def _ordered(self, ranked: list[tuple[int, Evidence]], chunk_order: dict[str, int]) -> list[Evidence]:
        """``ranked`` is best first; reorder as the ``order`` parameter says.

        Reading order: documents by their best record, then chunk index, then the record's
        offset in its chunk (the chunk frame the skeleton expanders cite in).
        """
        if self.params.order == "score":
            return [ev for _, ev in ranked]
        if self.params.order == "input":
            return [ev for _, ev in sorted(ranked, key=lambda t: t[0])]
        doc_rank: dict[str, int] = {}
        for _, ev in ranked:  # documents in the order of their best record
            doc_rank.setdefault(ev.document_id or ev.document, len(doc_rank))
        far = 1 << 62

        def reading(t: tuple[int, Evidence]) -> tuple[int, int, int, float]:
            ev = t[1]
            chunk = chunk_order.get(ev.chunk_id or "", far)
            offset = ev.char_offset if ev.char_offset is not None else far
            return (doc_rank[ev.document_id or ev.document], chunk, offset, -ev.score)

        return [ev for _, ev in sorted(ranked, key=reading)]


# --------------------------------------------------------------------------- keyword overlap


class KeywordOverlap(Stage):
    """Offline rerank: blend the retrieval score with the share of query terms each text contains."""

    name = "keyword_overlap"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        weight: float = Field(
            0.3, ge=0.0, le=1.0,
            description="score = (1 - weight) x score / best score + weight x overlap, where overlap "
            "is the fraction of the query's content terms found in the text. 0.3 keeps the vector "
            "score primary (the reference found sentence-level vector ranking already precise) and "
            "lets term evidence break near-ties.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        from graphroute.plugins.synthesizers.builtin import content_terms, query_overlap

        terms = content_terms(state.question)
        w = self.params.weight
        top = max((e.score for e in state.evidence), default=0.0)
        out: list[Evidence] = []
        moved = 0
        before = [e.id for e in state.evidence]
        for ev in state.evidence:
            overlap = query_overlap(terms, ev.text)
            base = ev.score / top if top > 0 else ev.score
            meta = {**ev.metadata, "keyword_overlap": round(overlap, 4), "pre_keyword_score": ev.score}
            out.append(ev.model_copy(update={"score": (1 - w) * base + w * overlap, "metadata": meta}))
        out.sort(key=lambda e: -e.score)
        moved = sum(1 for a, b in zip(before, (e.id for e in out), strict=True) if a != b)
        state.evidence = out
        ctx.stats.update({"query_terms": len(terms), "reordered": moved, "weight": w})


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [ConfidenceGate, StructuralCoherence, StructuralPrune, KeywordOverlap]
