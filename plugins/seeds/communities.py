"""What the seed stages read of a question's communities, from the store, a community at a
time: their members ranked by distinct neighbours (community_peers) and by mentions
(thematic_seeds), and the documents they span.

The communities index step writes those rankings onto each Community node (``peer_ids``,
``mentioned_ids``: the first ``PEERS_KEPT`` members of each, ``documents``), so a question
reads a few nodes. A group indexed before they existed, or a question that needs a longer
list than the node holds, reads the community's members through BELONGS_TO and ranks them
itself: bounded by the community's size, never the group's.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from graphroute.core.api.models import EdgeType, Label, Node
from graphroute.core.api.store import GraphStore


def communities_of(store: GraphStore, group: str, entity_ids: Sequence[str]) -> list[str]:
    """The Community node ids the entities BELONG_TO, in the entities' order, once each."""
    nb = store.neighbours(group, list(dict.fromkeys(entity_ids)), [EdgeType.BELONGS_TO], other_labels=[Label.COMMUNITY])
    first: dict[str, list[str]] = {}
    for e, c in zip(nb.node, nb.other, strict=True):
        first.setdefault(e, []).append(c)
    return list(dict.fromkeys(c for e in entity_ids for c in sorted(first.get(e, []))))


def members(store: GraphStore, group: str, community: str) -> list[str]:
    """Every entity that BELONGS_TO the community (its size, not the group's)."""
    nb = store.neighbours(group, [community], [EdgeType.BELONGS_TO], other_labels=[Label.ENTITY])
    return sorted(set(nb.other))


def _links(store: GraphStore, group: str, entity_ids: Sequence[str]) -> dict[str, int]:
    """Each entity's number of distinct neighbours over RELATION, CO_OCCURS and
    SEMANTICALLY_SIMILAR: its ``links`` property where the communities step wrote it, else
    counted from its edges."""
    nodes = {n.id: n for n in store.get_nodes(group, list(entity_ids))}
    out: dict[str, int] = {}
    missing = []
    for e in entity_ids:
        v = nodes[e].props.get("links") if e in nodes else None
        if isinstance(v, int) and not isinstance(v, bool):
            out[e] = v
        else:
            missing.append(e)
    if missing:
        types = [EdgeType.RELATION, EdgeType.CO_OCCURS, EdgeType.SEMANTICALLY_SIMILAR]
        nb = store.neighbours(group, missing, types)
        seen = {(a, b) for a, b in zip(nb.node, nb.other, strict=True)}
        out.update({e: 0 for e in missing})
        for a, _ in seen:
            out[a] += 1
    return out


def _listed(node: Node | None, key: str) -> tuple[list[str] | None, bool]:
    """The member list ``key`` of a Community node (None when the node has none) and whether
    it holds every member."""
    listed = node.props.get(key) if node is not None else None
    if not (isinstance(listed, list) and all(isinstance(x, str) for x in listed)):
        return None, False
    size = node.props.get("size") if node is not None else None
    return list(listed), isinstance(size, int) and len(listed) >= size


def top_peers(
    store: GraphStore, group: str, communities: Sequence[str], exclude: set[str], n: int
) -> list[tuple[str, int]]:
    """The ``n`` best-connected members of ``communities`` not in ``exclude`` with their
    number of distinct neighbours, most first (ties by id)."""
    nodes = {nd.id: nd for nd in store.get_nodes(group, list(communities))}
    lists: list[list[str]] = []
    for c in communities:
        listed, whole = _listed(nodes.get(c), "peer_ids")
        if listed is None or not (whole or sum(m not in exclude for m in listed) >= n):
            listed = members(store, group, c)  # no list, or too short for this question
        lists.append(listed)
    links = _links(store, group, list(dict.fromkeys(m for ms in lists for m in ms)))

    def key(m: str) -> tuple[int, str]:
        return (-links.get(m, 0), m)

    out: list[tuple[str, int]] = []
    for m in heapq.merge(*(sorted(ms, key=key) for ms in lists), key=key):
        if m not in exclude and (not out or out[-1][0] != m):
            out.append((m, links.get(m, 0)))
            if len(out) == n:
                break
    return out


def most_mentioned(store: GraphStore, group: str, community: Node | None, community_id: str, k: int) -> list[str]:
    """The community's ``k`` most mentioned members (``mention_count``), ties by id."""
    listed, whole = _listed(community, "mentioned_ids")
    if listed is not None and (whole or len(listed) >= k):
        return listed[:k]
    everyone = members(store, group, community_id)
    counts = {nd.id: nd.props.get("mention_count") for nd in store.get_nodes(group, everyone)}
    return sorted(everyone, key=lambda m: (-_number(counts.get(m)), m))[:k]


def documents(store: GraphStore, group: str, community: Node | None, community_id: str) -> int:
    """How many documents the community's members are mentioned in (their chunks' documents)."""
    held = community.props.get("documents") if community is not None else None
    if isinstance(held, int) and not isinstance(held, bool):
        return held
    nb = store.neighbours(group, members(store, group, community_id), [EdgeType.MENTIONS], other_labels=[Label.CHUNK])
    return len({d for d in nb.other_doc if d})


def _number(v: object) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0
