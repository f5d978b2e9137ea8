"""Route 2 denoisers, one stage per rule of the route2 reference (§6).

Entity scores drive these stages, so they keep ``state.entities`` and the evidence scores
consistent: evidence that came in through an entity (``Evidence.entity``, plus the other
entities that brought the same text, recorded by md5_dedup in ``metadata["entities"]``)
always carries the best current score among those entities. Evidence without an entity
(sentence search, vector hits) is never touched by the entity-based stages, so they are safe
after a merge with a non-graph branch.

Reference order (the "ordering bug" of §6.3): community_filter *before* score_gap; raw PPR
scores are too smooth for a gap to exist, the 0.3x community penalty creates the cliff.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Literal

from graphroute.core.api.models import Evidence, ScoredNode, content_hash
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.fusion import rrf_merge
from pydantic import Field

ENTITIES_KEY = "entities"  # Evidence.metadata key: every entity that brought this text
_WORD_RE = re.compile(r"[a-z0-9]+")


# --------------------------------------------------------------------------- helpers


def evidence_entities(ev: Evidence) -> list[str]:
    """Every entity id this evidence came in through (primary first)."""
    out = [ev.entity] if ev.entity else []
    for e in ev.metadata.get(ENTITIES_KEY, []) or []:
        if e not in out:
            out.append(e)
    return out


def rescore_evidence(evidence: list[Evidence], entities: Sequence[ScoredNode]) -> list[Evidence]:
    """Give entity-borne evidence the best score among its surviving entities (and make that
    entity its primary one); drop evidence whose entities were all pruned. Evidence without
    an entity is kept as it is. The result is sorted by score, stably."""
    score = {e.id: e.score for e in entities}
    out: list[Evidence] = []
    for ev in evidence:
        ents = evidence_entities(ev)
        if not ents:
            out.append(ev)
            continue
        alive = [e for e in ents if e in score]
        if not alive:
            continue
        best = max(alive, key=lambda e: score[e])
        ev.score = score[best]
        ev.entity = best
        out.append(ev)
    out.sort(key=lambda e: -e.score)
    return out


@lru_cache(maxsize=1 << 14)  # evidence texts recur between questions; pure
def text_digest(text: str) -> str:
    """The md5 of ``text`` with its whitespace runs collapsed: what :func:`md5_dedup` compares.

    Memoised like :func:`word_set`: hashing a question's ~60 chunk texts afresh took half of
    the stage (0.54 of 0.99 ms, route2_local on MuSiQue)."""
    return content_hash(" ".join(text.split()))


def md5_dedup(evidence: Iterable[Evidence]) -> tuple[list[Evidence], int]:
    """Exact content-hash dedup keeping the highest-scored copy (first seen on ties) in the
    position of the first copy; the entities of dropped copies are recorded on the kept one.

    A kept record is copied (:meth:`Evidence.detached`) only when its metadata changes, i.e.
    when it absorbed a duplicate's entities: copying every record cost ~20 us each, and a
    question's evidence rarely repeats."""
    kept: dict[str, Evidence] = {}
    order: list[str] = []
    copied: set[str] = set()  # digests whose kept record is already this call's own copy
    raw = 0
    for ev in evidence:
        raw += 1
        h = text_digest(ev.text)
        cur = kept.get(h)
        if cur is None:
            kept[h] = ev
            order.append(h)
            continue
        if ev.score > cur.score:
            winner, loser = ev, cur
            copied.discard(h)
        else:
            winner, loser = cur, ev
        ents = evidence_entities(winner)
        for e in evidence_entities(loser):
            if e not in ents:
                ents.append(e)
        if len(ents) > 1:
            if h not in copied:
                winner = winner.detached()
                copied.add(h)
            winner.metadata[ENTITIES_KEY] = ents[1:] if ents[0] == winner.entity else ents
        kept[h] = winner
    out = [kept[h] for h in order]
    return out, raw - len(out)


def target_community(entities: Sequence[ScoredNode], top: int = 3) -> int | None:
    """Majority community among the ``top`` best entities; on a tie, the community of the
    better-ranked entity wins. None when none of them has a community."""
    ranked = sorted(entities, key=lambda e: -e.score)[:top]
    votes = Counter(e.community for e in ranked if e.community is not None)
    if not votes:
        return None
    best = max(votes.values())
    for e in ranked:
        if e.community is not None and votes[e.community] == best:
            return e.community
    return None


def find_score_gap(scores: Sequence[float], threshold: float, min_keep: int) -> tuple[bool, int | None, float]:
    """Largest relative drop ``1 - s[i+1]/s[i]`` in descending ``scores``, scanning from
    ``i = min_keep - 1`` so at least ``min_keep`` survive. Returns (found, gap_index,
    gap_ratio) where gap_index is the last *kept* position (the reference's numbering:
    gap_index 8 keeps 9 entities); found only when the ratio reaches ``threshold``."""
    best_i: int | None = None
    best_ratio = 0.0
    for i in range(max(min_keep - 1, 0), len(scores) - 1):
        if scores[i] <= 0:
            continue
        ratio = 1.0 - scores[i + 1] / scores[i]
        if ratio > best_ratio:
            best_i, best_ratio = i, ratio
    if best_i is not None and best_ratio >= threshold:
        return True, best_i, best_ratio
    return False, best_i, best_ratio


def allocate(entities: Sequence[ScoredNode], limit: int) -> dict[str, int]:
    """Chunks per entity: ``max(1, round(score / max_score * limit))``; ``limit`` for every
    entity when all scores are equal or zero (the reference's uniform fallback)."""
    scores = [e.score for e in entities]
    if not scores:
        return {}
    top = max(scores)
    if top <= 0 or all(abs(s - top) <= 1e-12 * max(abs(top), 1.0) for s in scores):
        return {e.id: limit for e in entities}
    return {e.id: max(1, round(max(e.score, 0.0) / top * limit)) for e in entities}


@lru_cache(maxsize=1 << 14)  # evidence texts recur between questions; pure
def word_set(text: str) -> frozenset[str]:
    return frozenset(_WORD_RE.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def near_duplicate(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """``jaccard(a, b) >= threshold``, without the set operations when the sizes rule it out.

    Why: the intersection has at most the smaller set's words and the union at least the
    larger's, so the Jaccard is at most ``small / large``; at the default 0.92 two texts must
    be within 8% of each other's length to be near-duplicates, which few pairs are, and a
    length check costs a fraction of an intersection and a union of ~100-word sets. Both
    sides are correctly rounded quotients of the same kind, so the float Jaccard is never
    above the float bound and the answer is always the one ``jaccard`` gives."""
    small, large = sorted((len(a), len(b)))
    if small and small / large < threshold:
        return False
    return jaccard(a, b) >= threshold


def semantic_dedup(evidence: Sequence[Evidence], threshold: float) -> list[Evidence]:
    """Greedy by score (highest first): drop a text whose word-set Jaccard with any kept
    text reaches ``threshold``. Survivors keep their input order."""
    order = sorted(range(len(evidence)), key=lambda i: -evidence[i].score)
    kept_sets: list[frozenset[str]] = []
    keep: set[int] = set()
    for i in order:
        ws = word_set(evidence[i].text)
        if any(near_duplicate(ws, k, threshold) for k in kept_sets):
            continue
        kept_sets.append(ws)
        keep.add(i)
    return [ev for i, ev in enumerate(evidence) if i in keep]


# --------------------------------------------------------------------------- stages


class Md5Dedup(Stage):
    """Exact content-hash dedup of evidence, keeping the highest-scored copy."""

    name = "md5_dedup"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        pass

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        before = len(state.evidence)
        state.evidence, removed = md5_dedup(state.evidence)
        ctx.stats.update(
            {
                "chunks_before": before,
                "chunks_after": len(state.evidence),
                "duplicates_removed": removed,
                "dedup_ratio": round(removed / before, 4) if before else 0.0,
            }
        )


class CommunityFilter(Stage):
    """Penalise entities outside the majority community of the top-3 (x penalty)."""

    name = "community_filter"
    kind = StageKind.DENOISER
    consumes = (Slot.ENTITIES,)
    produces = (Slot.ENTITIES,)

    class Params(StageParams):
        penalty: float = Field(0.3, ge=0.0, le=1.0, description="Score multiplier for off-community entities.")
        top: int = Field(3, ge=1, le=100, description="How many top entities vote for the target community.")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        target = target_community(state.entities, self.params.top)
        ctx.stats["target_community"] = target
        if target is None:
            ctx.stats.update({"in_target": 0, "penalised": 0, "reason": "no community among the top entities"})
            return
        penalised: list[str] = []
        in_target = 0
        for e in state.entities:
            if e.community == target:
                in_target += 1
            else:
                e.score *= self.params.penalty
                penalised.append(e.name or e.id)
        state.entities.sort(key=lambda e: -e.score)
        state.evidence = rescore_evidence(state.evidence, state.entities)
        ctx.stats.update({"in_target": in_target, "penalised": len(penalised), "penalised_entities": penalised[:20]})


class ScoreGap(Stage):
    """Prune entities below the largest relative score drop (>= threshold), keeping >= min_keep."""

    name = "score_gap"
    kind = StageKind.DENOISER
    consumes = (Slot.ENTITIES,)
    produces = (Slot.ENTITIES,)

    class Params(StageParams):
        threshold: float = Field(0.5, gt=0.0, le=1.0, description="Relative drop 1 - s[i+1]/s[i] that counts as a gap.")
        min_keep: int = Field(6, ge=1, le=10_000, description="Never keep fewer entities (guards against penalty cliffs).")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        ents = sorted(state.entities, key=lambda e: -e.score)
        found, idx, ratio = find_score_gap([e.score for e in ents], self.params.threshold, self.params.min_keep)
        before = len(ents)
        if found and idx is not None:
            ents = ents[: idx + 1]
        state.entities = ents
        if found:
            state.evidence = rescore_evidence(state.evidence, ents)
        ctx.stats.update(
            {
                "gap_found": found,
                "gap_index": idx if found else None,
                "gap_ratio": round(ratio, 4) if found else None,
                "largest_ratio": round(ratio, 4),
                "entities_before": before,
                "entities_after": len(ents),
                "entities_pruned": before - len(ents),
            }
        )


class ScoreWeighted(Stage):
    """Chunks per entity proportional to its score: max(1, round(score / max * limit))."""

    name = "score_weighted"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        limit: int = Field(12, ge=1, le=1000, description="Chunks the best entity may keep (limit_per_entity).")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        alloc = allocate(state.entities, self.params.limit)
        used: Counter[str] = Counter()
        out: list[Evidence] = []
        before = len(state.evidence)
        for ev in state.evidence:
            if ev.entity is None or ev.entity not in alloc:
                out.append(ev)
                continue
            if used[ev.entity] < alloc[ev.entity]:
                used[ev.entity] += 1
                out.append(ev)
        state.evidence = out
        scores = [e.score for e in state.entities]
        ctx.stats.update(
            {
                "uniform": bool(scores) and (max(scores) <= 0 or len(set(scores)) == 1),
                "allocation": {e.name or e.id: alloc[e.id] for e in state.entities[:20]},
                "chunks_before": before,
                "chunks_after": len(out),
            }
        )


class SemanticDedup(Stage):
    """Near-duplicate removal: word-set Jaccard >= threshold, greedy by score."""

    name = "semantic_dedup"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        threshold: float = Field(0.92, gt=0.0, le=1.0, description="Jaccard similarity of word sets that marks a near-duplicate.")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        before = len(state.evidence)
        state.evidence = semantic_dedup(state.evidence, self.params.threshold)
        ctx.stats.update(
            {"chunks_before": before, "chunks_after": len(state.evidence), "near_duplicates_removed": before - len(state.evidence)}
        )


class VectorFallback(Stage):
    """Chunk vector hits beside the graph's evidence: appended below it, or fused with it by rank (RRF)."""

    name = "vector_fallback"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        k: int = Field(3, ge=1, le=1000, description="Chunk vector hits considered.")
        space: str = Field("chunk", description="Vector space searched.")
        merge: Literal["append", "rrf"] = Field(
            "append",
            description="append: hits missing from the pool go below it, in cosine order (a safety net). "
            "rrf: the pool's order and the hits' order are fused by reciprocal rank, so a passage both "
            "lists rank high comes first; PPR-derived scores and cosines are never compared.",
        )
        rrf_k: int = Field(60, ge=1, le=10_000, description="merge rrf: the k of 1 / (k + rank).")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        from graphroute.plugins.expanders.graph import chunk_evidence

        p = self.params
        store = ctx.services.store
        hits = store.vector_search(state.group, p.space, ctx.query_vector(state.question), p.k)
        have = {e.id for e in state.evidence}
        hashes = {text_digest(e.text) for e in state.evidence}
        new_ids = [(i, s) for i, s in hits if i not in have]
        nodes = {n.id: n for n in store.get_nodes(state.group, [i for i, _ in new_ids])}
        # append: below the pool, the graph path stays first, fallbacks keep cosine order
        floor = min((e.score for e in state.evidence), default=1.0)
        by_id = {e.id: e for e in state.evidence}
        ranked: list[Evidence] = []  # the hits as evidence, in cosine order (rrf's second list)
        added = 0
        for i, sim in hits:
            if i in by_id:
                ranked.append(by_id[i])
                continue
            nd = nodes.get(i)
            if nd is None:
                continue
            ev = chunk_evidence(nd, floor * 0.5 * max(sim, 0.0), source="vector_fallback")
            if text_digest(ev.text) in hashes:
                continue
            ev.metadata["cosine"] = round(sim, 4)
            ranked.append(ev)
            added += 1
        if p.merge == "rrf":
            state.evidence = rrf_merge([state.evidence, ranked], p.rrf_k)
        else:
            state.evidence.extend(e for e in ranked if e.id not in by_id)
        ctx.stats.update({"candidates": len(hits), "added": added, "duplicates": len(hits) - added, "merge": p.merge})


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [Md5Dedup, CommunityFilter, ScoreGap, ScoreWeighted, SemanticDedup, VectorFallback]
