"""Merging ranked evidence lists whose scores are on different scales."""

from __future__ import annotations

from collections.abc import Sequence

from graphroute.core.api.models import Evidence


def rrf_merge(lists: Sequence[Sequence[Evidence]], k: int = 60) -> list[Evidence]:
    """Reciprocal-rank fusion (Cormack et al. 2009): an item's score is the sum over the lists
    of ``1 / (k + rank)``, so only ranks count, never raw scores (PPR mass and cosines are not
    comparable). Best first, ties by id; each item is a copy of its first occurrence with
    the fused score, its own score kept in ``metadata["branch_score"]``."""
    fused: dict[str, float] = {}
    first: dict[str, Evidence] = {}
    for items in lists:
        for rank, e in enumerate(items, start=1):
            fused[e.id] = fused.get(e.id, 0.0) + 1.0 / (k + rank)
            first.setdefault(e.id, e)
    out = []
    for eid, score in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0])):
        ev = first[eid].model_copy()
        ev.metadata = {**ev.metadata, "branch_score": first[eid].score}
        ev.score = score
        out.append(ev)
    return out
