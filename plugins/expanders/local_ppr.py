"""Local personalised PageRank: forward push (Andersen, Chung and Lang, FOCS 2006) over
neighbourhoods read from the store a frontier at a time.

The exact solvers of :mod:`graphroute.plugins.expanders.graph` export the group's whole
typed graph into the client (once per store version); its memory and the first query after
every write grow with the corpus. This solver reads only the nodes the walk reaches: each
round, the nodes whose residual is large for their degree are read with
:meth:`GraphStore.neighbours` (one store call per round: one Cypher expansion on Neo4j,
the indexed adjacency on the embedded store) and pushed. It holds nothing between
questions.

**The system.** The same one the exact solvers solve: ``y = (I - d P)^-1 s`` with ``P =
A D^-1`` the column-normalised typed adjacency (the five paths, the chunk connectors and
the own-page edges,
weighted as :class:`~graphroute.plugins.expanders.graph.PathWeights` says), ``s`` the
normalised teleport vector and the scores ``y / |y|_1``. A node with no typed edge (a seed
outside the graph) keeps its teleport share, as there.

**Push.** The solver keeps an estimate ``q`` and a residual ``r`` with ``y = q + (I - d
P)^-1 r`` (at the start ``q = 0``, ``r = s``). Pushing node ``u`` moves ``r[u]`` to
``q[u]`` and spreads ``d r[u] A[v, u] / deg(u)`` to each neighbour ``v``, which keeps the
identity. Every node with ``r[u] >= eps deg(u)`` is pushed, a round at a time (all such
nodes of a round at once: each push keeps the identity, so their order does not matter).
When none is left, ``r <= eps D 1``; since ``P D 1 = A 1 = D 1`` for a symmetric ``A``,

    0 <= y - (q + r) = d P (I - d P)^-1 r <= eps d / (1 - d) * D 1,

so the scores, ``(q + r) / Z``, are below the exact ones by at most
``eps d deg(v) / ((1 - d) Z)`` at every node ``v`` (the stated ``error_bound`` is that
factor of ``deg(v)``), and by at most ``d |r|_1 / ((1 - d) Z)`` in L1 (``l1_error_bound``).
``Z = |y|_1`` is known exactly without solving: every column of ``P`` of a node with an
edge sums to one, so ``1^T y = |s_isolated| + |s_rest| / (1 - d)``. The work is bounded by
the graph volume ``1 / (eps (1 - d))`` of the pushed nodes whatever the corpus's size
(Andersen, Chung and Lang, Theorem 1).

**Reading only what is pushed.** A node's degree is counted in the store
(:meth:`GraphStore.neighbour_counts`: the expansion stays in the database) before its edges
are read, and only a node that is pushed has its edges read
(:meth:`GraphStore.neighbours`). Before a node is counted, the weights of its edges to
nodes already read are a lower bound ``L(v) <= deg(v)``; it is counted only when ``r[v] >=
eps L(v)``, i.e. when it may need a push. So every node ends with ``r < eps deg``, counted
or not, and the bound above holds. Degrees counted are kept between questions for the store
version (:class:`DegreeCache`, bounded): a hub is counted once, not by every question.

**Draining what is read.** A node whose edges are already in the client is pushed down to
``DRAIN x eps`` rather than ``eps``: its push costs no store query, so the part of the graph
already read is solved nearly exactly and the residual left is only on nodes not read
(the idea of PowerPush, Wu, Gan, Wei and Zhang, SIGMOD 2021, which switches to a global
solve once the frontier is large). The per-node bound above still holds (every residual is below ``eps deg``); the
L1 bound falls with the drained residual.

**How far to push** (``push_tolerance``). The error vector ``y - (q + r)`` is non-negative
and sums to ``d |r|_1 / (1 - d)``, so no node's score is off by more than that L1 bound. The
push starts at ``push_eps`` and goes on at a third of eps (resuming from its residual, down
to ``min_eps``) until the L1 bound is at most ``push_tolerance`` of the smallest score it
ranks (the ``top_k``-th entity's or chunk's): then no ranked score is off by more than that
share of the smallest, and a node outside the ranking can overtake a ranked one only by less
than that margin. Where PageRank mass reaches the whole graph within a few hops (a small,
densely linked corpus such as the MuSiQue slice), certifying this reads the whole typed
graph; on a large graph the walk stays where the seeds' mass is.

The walk's node kinds are the typed graph's: entities, text chunks and sections (sentence
mentions are not part of it; the store filters them by the far end's label).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from graphroute.core.api.models import EdgeType, Label
from graphroute.core.api.neighbourhood import NeighbourCounts, Neighbourhood
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore, cache_token
from graphroute.core.errors import ConfigError
from graphroute.core.lib.entities import ENTITY_ID_PREFIX
from graphroute.core.lib.topk import largest

from .graph import (
    DEFAULT_PUSH_EPS,
    MIN_PUSH_EPS,
    NodeMass,
    _scored,
    budget_cut,
    has_own_pages,
    settle_ties,
)

if TYPE_CHECKING:
    from .graph import PPR

DRAIN = 1e-3  # read nodes are pushed down to this share of eps
# node kinds of the typed graph (the far ends a walk may reach)
WALK_LABELS: tuple[str, ...] = (Label.ENTITY.value, Label.CHUNK.value, Label.SECTION.value)
ENTITY, CHUNK = Label.ENTITY.value, Label.CHUNK.value


@dataclass(frozen=True)
class Paths:
    """Weights of the typed edge paths (mirrors ``PathWeights`` of the exact solvers)."""

    entity: float
    section: float
    similar: float
    shares: float
    hub: float
    mentions: float
    title: float = 0.0

    def edge_types(self) -> list[str]:
        """The edge types any non-zero path walks."""
        types: list[str] = []
        if self.entity:
            types += [EdgeType.RELATION.value, EdgeType.CO_OCCURS.value]
        if self.similar or self.section:
            types.append(EdgeType.SEMANTICALLY_SIMILAR.value)
        if self.shares:
            types.append(EdgeType.SHARES_ENTITY.value)
        if self.hub:
            types.append(EdgeType.HAS_HUB_ENTITY.value)
        if self.mentions:
            types += [EdgeType.MENTIONS.value, EdgeType.IN_SECTION.value]
        if self.title:
            types.append(EdgeType.OWN_PAGE.value)
        return types


_CODES = {
    EdgeType.RELATION.value: 1, EdgeType.CO_OCCURS.value: 1, EdgeType.SEMANTICALLY_SIMILAR.value: 2,
    EdgeType.SHARES_ENTITY.value: 3, EdgeType.HAS_HUB_ENTITY.value: 4, EdgeType.MENTIONS.value: 5,
    EdgeType.IN_SECTION.value: 6, EdgeType.OWN_PAGE.value: 7,
}


def _weights(
    code: np.ndarray, node_ent: np.ndarray, node_chunk: np.ndarray, other_ent: np.ndarray, other_chunk: np.ndarray,
    paths: Paths,
) -> np.ndarray:
    """The weight of each edge (type code, kinds of its two ends): the rules the exact
    solvers' typed graph applies to the exported edges (``_build_typed_graph``): entity
    edges between entities, similarity between two entities (kNN) or two non-entities
    (sections), MENTIONS and OWN_PAGE between a chunk and an entity, IN_SECTION with a
    chunk end.
    Entities are the nodes labelled Entity (whose ids are ``ent:`` ids)."""
    both_ent = node_ent & other_ent
    w = np.zeros(len(code))
    w[(code == 1) & both_ent] = paths.entity
    w[(code == 2) & both_ent] = paths.similar
    w[(code == 2) & ~node_ent & ~other_ent] = paths.section
    w[code == 3] = paths.shares
    w[code == 4] = paths.hub
    chunk_entity = (node_chunk & other_ent) | (other_chunk & node_ent)
    w[(code == 5) & chunk_entity] = paths.mentions
    w[(code == 6) & (node_chunk | other_chunk)] = paths.mentions
    w[(code == 7) & chunk_entity] = paths.title
    return w


def row_weights(nb: Neighbourhood, paths: Paths) -> np.ndarray:
    """The weight each row of ``nb`` adds to its node's adjacency (:func:`_weights`)."""
    n = len(nb)
    labels = nb.labels
    code = np.fromiter((_CODES.get(t, 0) for t in nb.type), dtype=np.int8, count=n)
    node_label = [labels.get(x) for x in nb.node]
    return _weights(
        code,
        np.fromiter((lb == ENTITY for lb in node_label), dtype=bool, count=n),
        np.fromiter((lb == CHUNK for lb in node_label), dtype=bool, count=n),
        np.fromiter((lb == ENTITY for lb in nb.other_label), dtype=bool, count=n),
        np.fromiter((lb == CHUNK for lb in nb.other_label), dtype=bool, count=n),
        paths,
    )


def degrees(nc: NeighbourCounts, paths: Paths) -> dict[str, float]:
    """Each counted node's weighted degree in the typed graph (the sum of
    :func:`row_weights` over its rows, from their counts)."""
    out: dict[str, float] = {}
    for node, rows in nc.counts.items():
        label = nc.labels.get(node)
        code = np.fromiter((_CODES.get(t, 0) for t, _, _ in rows), dtype=np.int8, count=len(rows))
        k = len(rows)
        w = _weights(
            code,
            np.full(k, label == ENTITY),
            np.full(k, label == CHUNK),
            np.fromiter((lb == ENTITY for _, lb, _ in rows), dtype=bool, count=k),
            np.fromiter((lb == CHUNK for _, lb, _ in rows), dtype=bool, count=k),
            paths,
        )
        out[node] = float(w @ np.fromiter((n for _, _, n in rows), dtype=np.float64, count=k))
    return out


@dataclass
class LocalPPR:
    """The outcome of one push: the nodes the walk touched and their scores."""

    ids: list[str]  # touched nodes, in the order first touched
    labels: list[str]  # their labels ("" where the walk never learnt it)
    scores: np.ndarray  # (q + r) / Z per touched node
    rounds: int
    nodes_read: int  # nodes whose edges were read
    nodes_counted: int  # nodes whose degree was known (their edges stayed in the store)
    degrees_cached: int  # ... of which from the degree cache, not counted in the store
    queries: int  # store queries made
    rows_read: int  # neighbourhood rows (edge ends) read from the store
    pushes: int
    error_bound: float  # the scores are below the exact ones by at most this x deg(v)
    l1_error_bound: float  # ... and by at most this in L1
    residual: float  # |r|_1 / Z left unpushed
    seeds_in_graph: int  # seeds with at least one typed edge
    nodes_pushed: int = 0  # distinct nodes pushed at least once
    rows_pushed: int = 0  # the rows of those nodes (the rest of rows_read only told a degree)
    eps: float = DEFAULT_PUSH_EPS  # the eps the push ended at

    @property
    def nodes_touched(self) -> int:
        return len(self.ids)


DEGREE_CACHE_MAX = 200_000


class DegreeCache:
    """Typed degrees (and labels) of the nodes walks counted, kept between questions for the
    store version they were counted at: a hub's degree is counted in the store once, not by
    every question that reaches it. At most ``limit`` entries in all (a few tens of MB),
    cleared whole when full: bounded, whatever the corpus's size."""

    def __init__(self, limit: int = DEGREE_CACHE_MAX) -> None:
        self.limit = limit
        self._tables: dict[tuple[Any, ...], dict[str, tuple[float, str]]] = {}
        self._lock = threading.Lock()

    def of(self, store: GraphStore, group: str, paths: Paths) -> dict[str, tuple[float, str]]:
        """The degrees of ``group`` at its current version under ``paths``."""
        key = (cache_token(store), group, store.version(group), paths)
        with self._lock:
            if sum(len(t) for t in self._tables.values()) >= self.limit:
                self._tables.clear()
            stale = [k for k in self._tables if k[:2] == key[:2] and k != key]
            for k in stale:  # an older version of this group
                del self._tables[k]
            return self._tables.setdefault(key, {})


_DEGREES = DegreeCache()


class _Walk:
    """What one push has read: growable per-node arrays, and the neighbourhoods read as one
    growing edge list (each read node's rows contiguous: ``first[u]``, ``count[u]``)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.labels: list[str] = []
        cap = 1024
        self.r = np.zeros(cap)
        self.q = np.zeros(cap)
        self.deg = np.zeros(cap)
        self.known = np.zeros(cap)  # lower bound of the degree: edges to nodes already read
        self.counted = np.zeros(cap, dtype=bool)  # degree known (``deg``)
        self.read = np.zeros(cap, dtype=bool)  # edges read (``first``, ``count``)
        self.first = np.zeros(cap, dtype=np.int64)
        self.count = np.zeros(cap, dtype=np.int64)
        self.nbr = np.zeros(cap, dtype=np.int64)  # the edge list: other end, weight
        self.wt = np.zeros(cap)
        self.edges = 0
        self.rows = 0
        self.queries = 0
        self.cached = 0  # degrees taken from the cache

    def __len__(self) -> int:
        return len(self.ids)

    def touch(self, node_ids: Sequence[str], labels: Sequence[str] | None = None) -> np.ndarray:
        """Local indices of ``node_ids``, adding the new ones."""
        index = self.index
        out = np.empty(len(node_ids), dtype=np.int64)
        for k, x in enumerate(node_ids):
            i = index.get(x)
            if i is None:
                i = index[x] = len(self.ids)
                self.ids.append(x)
                self.labels.append(labels[k] if labels is not None else "")
            out[k] = i
        self.r, self.q, self.deg, self.known, self.counted, self.read, self.first, self.count = (
            _grown(a, len(self.ids))
            for a in (self.r, self.q, self.deg, self.known, self.counted, self.read, self.first, self.count)
        )
        return out

    def count_degrees(
        self, store: GraphStore, group: str, nodes: np.ndarray, paths: Paths, types: list[str], cache: dict[str, tuple[float, str]]
    ) -> None:
        """Learn the degrees of ``nodes`` (local indices) without reading their edges: from
        ``cache`` (this store version's degrees, kept between questions) or counted in the
        store."""
        todo = []
        for i in nodes.tolist():
            hit = cache.get(self.ids[i])
            if hit is None:
                todo.append(i)
            else:
                self.deg[i], label = hit
                self.labels[i] = label or self.labels[i]
                self.cached += 1
        if todo:
            asked = [self.ids[i] for i in todo]
            nc = store.neighbour_counts(group, asked, types, other_labels=WALK_LABELS)
            self.queries += 1
            found = degrees(nc, paths)
            for i, x in zip(todo, asked, strict=True):
                label = nc.labels.get(x) or ""
                if label:
                    self.labels[i] = label
                self.deg[i] = found.get(x, 0.0)
                cache[x] = (self.deg[i], label)
        self.counted[nodes] = True

    def load(self, store: GraphStore, group: str, nodes: np.ndarray, paths: Paths, types: list[str]) -> None:
        """Read the edges of ``nodes`` (local indices, degrees counted): the round's whole
        frontier in one store call (one statement on Neo4j up to its frontier batch)."""
        asked = [self.ids[int(i)] for i in nodes]
        nb = store.neighbours(group, asked, types, other_labels=WALK_LABELS)
        self.queries += 1
        self.rows += len(nb)
        for x in asked:
            label = nb.labels.get(x)
            if label is not None:
                self.labels[self.index[x]] = label
        w = row_weights(nb, paths)
        keep = np.flatnonzero(w > 0)
        src = self.touch([nb.node[k] for k in keep])
        dst = self.touch([nb.other[k] for k in keep], [nb.other_label[k] for k in keep])
        w = w[keep]
        # a node's rows need not come together from the store: group them by node
        order = np.argsort(src, kind="stable")
        src, dst, w = src[order], dst[order], w[order]
        base = self.edges
        self.edges += len(src)
        self.nbr = _grown(self.nbr, self.edges)
        self.wt = _grown(self.wt, self.edges)
        self.nbr[base : self.edges] = dst
        self.wt[base : self.edges] = w
        nodes_with, first, count = np.unique(src, return_index=True, return_counts=True)
        self.first[nodes_with] = base + first
        self.count[nodes_with] = count
        self.known[: len(self.ids)] += np.bincount(dst, weights=w, minlength=len(self.ids))
        self.read[nodes] = True

    def ranked_floor(self, k: int) -> float:
        """The smaller of the ``k``-th best entity's and the ``k``-th best chunk's current
        estimate (unnormalised; the best one's where fewer than ``k`` have any): the
        smallest score the route ranks."""
        n = len(self.ids)
        est = self.q[:n] + self.r[:n]
        floors = []
        for label in (ENTITY, CHUNK):
            kind = np.fromiter((lb == label for lb in self.labels), dtype=bool, count=n)
            top = largest(est, np.flatnonzero(kind & (est > 0)), k)
            if len(top):
                floors.append(float(est[top].min()))
        return min(floors) if floors else 0.0

    def push_eps(self, nodes: np.ndarray | slice, eps: float) -> np.ndarray:
        """The eps each of ``nodes`` is pushed down to: ``DRAIN x eps`` for a read node (its
        edges are in the client, so its push costs no store query), ``eps`` for the others."""
        return np.where(self.read[nodes], eps * DRAIN, eps)

    def spread(self, nodes: np.ndarray, shares: np.ndarray) -> np.ndarray:
        """``sum_u shares[u] * A[:, u]`` over ``nodes`` (read ones), as a dense vector."""
        count = self.count[nodes]
        total = int(count.sum())
        n = len(self.ids)
        if not total:
            return np.zeros(n)
        # the positions of every node's rows in the edge list, without a Python loop
        ends = np.cumsum(count)
        pos = np.arange(total) + np.repeat(self.first[nodes] - (ends - count), count)
        return np.bincount(self.nbr[pos], weights=self.wt[pos] * np.repeat(shares, count), minlength=n)


def _grown(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` with room for at least ``n`` entries (doubled; new entries zero)."""
    if n <= len(a):
        return a
    cap = max(len(a), 1)
    while cap < n:
        cap *= 2
    out = np.zeros(cap, dtype=a.dtype)
    out[: len(a)] = a
    return out


def push_pagerank(
    store: GraphStore,
    group: str,
    seed_ids: Sequence[str],
    seed_weights: np.ndarray,
    paths: Paths,
    *,
    damping: float,
    eps: float = DEFAULT_PUSH_EPS,
    tolerance: float | None = None,
    top_k: int = 10,
    min_eps: float = MIN_PUSH_EPS,
    max_rounds: int = 10_000,
) -> LocalPPR:
    """Approximate personalised PageRank from weighted seeds by forward push, reading the
    store a frontier at a time (see the module docstring for the bound it certifies).

    With ``tolerance``, the push goes on at a third of ``eps`` at a time (down to
    ``min_eps``) until its L1 error bound is at most ``tolerance`` of the smaller of the
    ``top_k``-th best entity's and chunk's scores."""
    walk = _Walk()
    weights = np.asarray(seed_weights, dtype=np.float64)
    total = float(weights.sum())
    if total <= 0 or not len(seed_ids):
        return LocalPPR([], [], np.zeros(0), 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0, eps=eps)
    seeds = walk.touch(list(seed_ids))
    np.add.at(walk.r, seeds, weights / total)
    types = paths.edge_types()
    cache = _DEGREES.of(store, group, paths)
    rounds = pushes = 0
    pushed = np.zeros(0, dtype=bool)
    d = damping
    while rounds < max_rounds:
        n = len(walk)
        r = walk.r[:n]
        counted = walk.counted[:n]
        bound = np.where(counted, walk.deg[:n], walk.known[:n])
        # the part of the graph already read is solved nearly exactly; only new nodes wait for eps
        cand = np.flatnonzero((r > 0) & (r >= walk.push_eps(slice(0, n), eps) * bound))
        if not len(cand):
            if tolerance is None or eps <= min_eps or d * float(r.sum()) / (1.0 - d) <= tolerance * walk.ranked_floor(top_k):
                break
            eps = max(eps / 3.0, min_eps)
            continue
        uncounted = cand[~counted[cand]]
        if len(uncounted):
            walk.count_degrees(store, group, uncounted, paths, types, cache)
            # their degrees may leave some below the threshold: only the others are read
            cand = cand[walk.r[cand] >= walk.push_eps(cand, eps) * walk.deg[cand]]
        unread = cand[~walk.read[cand] & (walk.deg[cand] > 0)]
        if len(unread):
            walk.load(store, group, unread, paths, types)
        pushed = _grown(pushed, len(walk))
        if not len(cand):
            continue
        rounds += 1
        pushes += len(cand)
        pushed[cand] = True
        mass = walk.r[cand].copy()
        walk.q[cand] += mass
        walk.r[cand] = 0.0
        deg = walk.deg[cand]
        spread = deg > 0  # a node without typed edges keeps its mass (it teleports back)
        walk.r[: len(walk)] += walk.spread(cand[spread], d * mass[spread] / deg[spread])
    n = len(walk)
    r, q = walk.r[:n], walk.q[:n]
    isolated = walk.counted[:n] & (walk.deg[:n] <= 0)
    s_iso = float(q[isolated].sum())
    z = s_iso + (1.0 - s_iso) / (1.0 - d)
    scores = (q + r) / z
    residual = float(r.sum())
    return LocalPPR(
        ids=walk.ids,
        labels=walk.labels,
        scores=scores,
        rounds=rounds,
        nodes_read=int(walk.read[:n].sum()),
        nodes_counted=int(walk.counted[:n].sum()),
        degrees_cached=walk.cached,
        queries=walk.queries,
        rows_read=walk.rows,
        pushes=pushes,
        error_bound=eps * d / ((1.0 - d) * z),
        l1_error_bound=d * residual / ((1.0 - d) * z),
        residual=residual / z,
        seeds_in_graph=int((walk.deg[np.unique(seeds)] > 0).sum()),
        nodes_pushed=int(pushed.sum()),
        rows_pushed=int(walk.count[: len(pushed)][pushed].sum()),
        eps=eps,
    )


def run_push(stage: PPR, state: QueryState, ctx: StageContext, seed_ids: Sequence[str], seed_weights: np.ndarray, damping: float) -> None:
    """The ppr stage with ``solver: push``: ranks entities (and hands the chunks' mass to
    ``ppr_passages``) exactly as the exact solvers' branch does, from the touched nodes."""
    p = stage.params
    store = ctx.services.store
    w = stage.weights()
    if w.title and not has_own_pages(store, state.group):
        raise ConfigError(
            f"group {state.group!r} was indexed before its own-page links were written as OWN_PAGE edges, which "
            "the push reads (weight_title > 0); run `graphroute index` on it again (it adds them without "
            "re-extracting), or set ppr.weight_title=0"
        )
    paths = Paths(w.entity, w.section, w.similar, w.shares, w.hub, w.mentions, w.title)
    res = push_pagerank(store, state.group, seed_ids, seed_weights, paths, damping=damping, eps=p.push_eps,
                        tolerance=p.push_tolerance, top_k=p.top_k)
    mass = settle_ties(res.scores)
    n = len(res.ids)
    is_ent = np.fromiter((x.startswith(ENTITY_ID_PREFIX) for x in res.ids), dtype=bool, count=n)
    scores = np.where(is_ent, mass, 0.0)
    # the k best entities, equal scores by id (the exact branch's nodes are in id order)
    cand = largest(scores, np.flatnonzero(scores > 0), p.top_k)
    top = sorted(cand.tolist(), key=lambda i: (-scores[i], res.ids[i]))[: p.top_k]
    keep = budget_cut([float(scores[i]) for i in top], p.budget)
    chosen = top[:keep]
    nodes = {nd.id: nd for nd in store.get_nodes(state.group, [res.ids[i] for i in chosen])}
    state.entities = [_scored(res.ids[i], float(scores[i]), nodes.get(res.ids[i])) for i in chosen]
    chunk = Label.CHUNK.value
    is_chunk = np.fromiter((lb == chunk for lb in res.labels), dtype=bool, count=n)
    index = {x: i for i, x in enumerate(res.ids)}
    state.node_scores = NodeMass(res.ids, index, np.where(is_ent, 0.0, mass), is_chunk)
    ranked_mass = sum(float(scores[i]) for i in top)
    ctx.stats.update(
        {
            "solver": "push",
            "engine": f"forward push, reads from the {getattr(store, 'backend', '') or 'store'} store",
            "converged": True,
            "eps": res.eps,
            "error_bound": res.error_bound,
            "l1_error_bound": round(res.l1_error_bound, 8),
            "nodes_touched": res.nodes_touched,
            "nodes_read": res.nodes_read,
            "degrees_counted": res.nodes_counted - res.degrees_cached,
            "queries": res.queries,
            "rows_read": res.rows_read,
            "rounds": res.rounds,
            "pushes": res.pushes,
            "seeds_in_graph": res.seeds_in_graph,
            "entities_ranked": len(top),
            "entities_kept": len(chosen),
            "budget_mass": round(sum(float(scores[i]) for i in chosen) / max(ranked_mass, 1e-300), 4),
            "top": [{"entity": e.name or e.id, "score": round(e.score, 6)} for e in state.entities[:5]],
        }
    )
