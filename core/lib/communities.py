"""Community summaries as text for a prompt: what the NER prompt's hints and the
synthesizer's background section show a model.

A community node (built at index time) holds a few-word ``title`` and a ``summary`` of what
connects its entities. Route 5's thematic tier records the communities it matched for a
question under ``QueryState.extras[THEMATIC_COMMUNITIES]``, so a later stage can hand the
same ones to the model (route5 reference §6.3: no extra LLM call, no extra search).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from graphroute.core.api.models import VectorSpace
from graphroute.core.api.store import GraphStore

THEMATIC_COMMUNITIES = "thematic_communities"  # QueryState.extras key: community ids, best first


def nearest_communities(
    store: GraphStore, group: str, vector: np.ndarray, n: int, min_similarity: float = -1.0
) -> list[str]:
    """Ids of the ``n`` communities whose summary vectors are nearest ``vector`` (at least
    ``min_similarity``); [] when the group has no community vectors."""
    if n <= 0:
        return []
    try:
        hits = store.vector_search(group, VectorSpace.COMMUNITY, vector, n)
    except Exception:  # a group indexed without communities has no such space
        return []
    return [c for c, s in hits if s >= min_similarity]


def community_texts(store: GraphStore, group: str, ids: Sequence[str], summary_chars: int) -> list[str]:
    """``title: summary`` for each community in ``ids`` (in that order), the summary cut to
    ``summary_chars`` characters; the title alone when ``summary_chars`` is 0 or there is no
    summary. Communities with neither are left out."""
    by_id = {n.id: n for n in store.get_nodes(group, list(ids))}
    out: list[str] = []
    for cid in ids:
        node = by_id.get(cid)
        if node is None:
            continue
        title = " ".join(str(node.props.get("title") or node.props.get("name") or "").split())
        summary = " ".join(str(node.props.get("summary") or "").split())
        if summary_chars and len(summary) > summary_chars:
            summary = summary[: max(summary_chars - 3, 1)].rstrip() + "..."
        if not summary_chars or not summary:
            text = title
        else:
            text = f"{title}: {summary}" if title else summary
        if text:
            out.append(text)
    return out
