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

**The remainder** (:func:`spread_remainder`). What the push leaves unpushed still walks in
the exact solve, ``l1_error_bound`` of mass in all, and at the damping of the routes (a
mean walk of several steps) most of it mixes over the graph before it stops, where a walk
ends in proportion to degree. A hub's exact score is mostly such mass, and its residual
threshold, ``eps deg``, is the highest: without it the push ranks the hubs low. So the
scores the stage ranks by add each of the best entities' and chunks' degree share of that
mass, ``l1_error_bound x deg(v) / vol`` (``vol``, the typed graph's volume, counted in the
store per store version: :meth:`GraphStore.type_totals`). With the node's own degree the
share is below its bound, so a score stays within ``error_bound x deg(v)`` of the exact
one, on either side (an entity's degree may be an estimate: :func:`node_degrees`).

**Reading only what is pushed.** A node's degree is counted in the store
(:meth:`GraphStore.neighbour_counts`: the expansion stays in the database) before its edges
are read, and only a node that is pushed has its edges read
(:meth:`GraphStore.neighbours`). Before a node is counted, the weights of its edges to
nodes already read are a lower bound ``L(v) <= deg(v)``; it is counted only when ``r[v] >=
eps L(v)``, i.e. when it may need a push. Where the store keeps degrees per node and edge
type (:meth:`GraphStore.type_degrees`, Neo4j), they come first: the types whose far end the
node's own label decides (``OTHER_END``: a chunk's MENTIONS lead to entities) give its
degree outright or a larger ``L(v)`` (an entity's MENTIONS may come from sentences, which
the walk leaves out), at the cost of a look-up, not of reading edges. A count may stop
once it shows the degree above ``r / eps`` (``COUNT_LIMITS``): the rows counted are then a
larger ``L(v)``, and a hub the walk barely reaches costs the store a few of its edges, not
all of them. So every node ends with ``r < eps deg``, counted or not, and the bound above
holds. Degrees
counted whole are kept between questions for the store version (:class:`DegreeCache`,
bounded): a hub is counted once, not by every question.

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
from dataclasses import asdict, astuple, dataclass, replace
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
from graphroute.core.api.models import EdgeType, Label
from graphroute.core.api.neighbourhood import NeighbourCounts, TypeDegrees
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore, cache_token, per_version, read_version
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
ENTITY, CHUNK, SECTION = Label.ENTITY.value, Label.CHUNK.value, Label.SECTION.value

# The label at the far end of every edge of a walked type, where a node's own label and the
# type decide it (the ends EdgeType documents). Not listed: an entity's MENTIONS, which come
# from chunks or from sentences (which the walk leaves out).
OTHER_END: dict[tuple[str, str], str] = {
    (ENTITY, EdgeType.RELATION.value): ENTITY,
    (ENTITY, EdgeType.CO_OCCURS.value): ENTITY,
    (ENTITY, EdgeType.SEMANTICALLY_SIMILAR.value): ENTITY,
    (ENTITY, EdgeType.HAS_HUB_ENTITY.value): SECTION,
    (ENTITY, EdgeType.OWN_PAGE.value): CHUNK,
    (CHUNK, EdgeType.MENTIONS.value): ENTITY,
    (CHUNK, EdgeType.IN_SECTION.value): SECTION,
    (CHUNK, EdgeType.OWN_PAGE.value): ENTITY,
    (SECTION, EdgeType.IN_SECTION.value): CHUNK,
    (SECTION, EdgeType.SEMANTICALLY_SIMILAR.value): SECTION,
    (SECTION, EdgeType.SHARES_ENTITY.value): SECTION,
    (SECTION, EdgeType.HAS_HUB_ENTITY.value): ENTITY,
}


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

    def min_weight(self) -> float:
        """The smallest positive weight an edge may get (each counted edge adds at least this
        much to a node's weighted degree); 0 when every path is off."""
        return min((w for w in astuple(self) if w > 0), default=0.0)


_CODES = {
    EdgeType.RELATION.value: 1, EdgeType.CO_OCCURS.value: 1, EdgeType.SEMANTICALLY_SIMILAR.value: 2,
    EdgeType.SHARES_ENTITY.value: 3, EdgeType.HAS_HUB_ENTITY.value: 4, EdgeType.MENTIONS.value: 5,
    EdgeType.IN_SECTION.value: 6, EdgeType.OWN_PAGE.value: 7,
}
# a node's kind: 1 + its label's place in WALK_LABELS, 0 while not known
_KINDS: dict[str | None, int] = {label: k + 1 for k, label in enumerate(WALK_LABELS)}
UNKNOWN, ENT_KIND, CHUNK_KIND = 0, _KINDS[ENTITY], _KINDS[CHUNK]


def _type_codes(types: Sequence[str]) -> np.ndarray:
    """``_CODES`` of each edge type (0: not a walked type), by a C-level map, not a loop."""
    return np.fromiter(map(_CODES.get, types, repeat(0)), dtype=np.int8, count=len(types))


def _kinds(labels: Sequence[str | None]) -> np.ndarray:
    """The kind of each label (``_KINDS``; 0 for any other)."""
    return np.fromiter(map(_KINDS.get, labels, repeat(UNKNOWN)), dtype=np.int8, count=len(labels))


def _weights(code: np.ndarray, node_kind: np.ndarray, other_kind: np.ndarray, paths: Paths) -> np.ndarray:
    """The weight of each edge (type code, kinds of its two ends): the rules the exact
    solvers' typed graph applies to the exported edges (``_build_typed_graph``): entity
    edges between entities, similarity between two entities (kNN) or two non-entities
    (sections), MENTIONS and OWN_PAGE between a chunk and an entity, IN_SECTION with a
    chunk end. Entities are the nodes labelled Entity (whose ids are ``ent:`` ids)."""
    node_ent, other_ent = node_kind == ENT_KIND, other_kind == ENT_KIND
    node_chunk, other_chunk = node_kind == CHUNK_KIND, other_kind == CHUNK_KIND
    chunk_entity = (node_chunk & other_ent) | (other_chunk & node_ent)
    w = np.zeros(len(code))
    w[(code == 1) & node_ent & other_ent] = paths.entity
    w[(code == 2) & node_ent & other_ent] = paths.similar
    w[(code == 2) & ~node_ent & ~other_ent] = paths.section
    w[code == 3] = paths.shares
    w[code == 4] = paths.hub
    w[(code == 5) & chunk_entity] = paths.mentions
    w[(code == 6) & (node_chunk | other_chunk)] = paths.mentions
    w[(code == 7) & chunk_entity] = paths.title
    return w


def degrees(nc: NeighbourCounts, paths: Paths) -> dict[str, float]:
    """Each counted node's weighted degree in the typed graph (the :func:`_weights` of its
    rows times their counts, summed), every node's rows in one vectorised pass."""
    nodes = list(nc.counts)
    lengths = [len(nc.counts[x]) for x in nodes]
    rows = [row for x in nodes for row in nc.counts[x]]
    if not rows:
        return {}
    types, others, counts = zip(*rows, strict=True)
    node_kind = np.repeat(_kinds([nc.labels.get(x) for x in nodes]), lengths)
    w = _weights(_type_codes(types), node_kind, _kinds(others), paths) * np.asarray(counts, dtype=np.float64)
    sums = np.bincount(np.repeat(np.arange(len(nodes)), lengths), weights=w, minlength=len(nodes))
    return dict(zip(nodes, sums.tolist(), strict=True))


def decided_degrees(td: TypeDegrees, paths: Paths) -> tuple[np.ndarray, np.ndarray]:
    """From :meth:`GraphStore.type_degrees`' table: each node's weighted degree over the
    types whose far end its own label decides (``OTHER_END``: a chunk's MENTIONS lead to
    entities), and whether that is its whole degree. A node with edges of a type its label
    does not decide (an entity's MENTIONS may come from sentences, which the walk leaves
    out) has at least that degree. A column at a time, no Python step per node."""
    n = len(td.ids)
    kinds = _kinds(td.labels)
    deg = np.zeros(n)
    undecided = np.zeros(n, dtype=bool)
    for j, t in enumerate(td.types):
        col = td.counts[:, j]
        # the far end's kind for each node kind (0: the label does not decide it)
        far_of = np.array([_KINDS.get(OTHER_END.get((label, t)), UNKNOWN) for label in ("", *WALK_LABELS)], dtype=np.int8)
        far = far_of[kinds]
        decided = far != UNKNOWN
        w = _weights(np.full(n, _CODES.get(t, 0), dtype=np.int8), kinds, far, paths)
        deg += np.where(decided, col * w, 0.0)
        undecided |= (col > 0) & ~decided
    return deg, ~undecided


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
    error_bound: float  # the scores are within this x deg(v) of the exact ones
    l1_error_bound: float  # the mass the push left unpushed (the L1 error of q + r)
    residual: float  # |r|_1 / Z left unpushed
    seeds_in_graph: int  # seeds with at least one typed edge
    nodes_pushed: int = 0  # distinct nodes pushed at least once
    rows_pushed: int = 0  # the rows of those nodes (the rest of rows_read only told a degree)
    eps: float = DEFAULT_PUSH_EPS  # the eps the push ended at
    ranked_error: float = 0.0  # Walk.certificate: the ranking's error bound, a share of the smallest ranked score
    certified: bool | None = None  # ranked_error is within the tolerance asked for; None: none was asked
    counts_stopped: int = 0  # degrees left as a lower bound past the push threshold (a count stopped at a limit, or type degrees)
    in_database: bool = False  # the walk ran inside the database (GraphStore.push_pagerank)
    truncated: bool = False  # the walk stopped at MAX_PUSH_ROWS edges read
    spread_to: int = 0  # nodes given the remainder's share (spread_remainder)
    volume: float | None = None  # the typed graph's volume it was spread over
    server_timings: dict[str, float] | None = None  # in the database: seeds_ms, walk_ms, server_ms

    @property
    def nodes_touched(self) -> int:
        return len(self.ids)


DEGREE_CACHE_MAX = 200_000
# The counts a push may stop at (one store call per limit a round needs): a node whose
# degree need only be shown above its threshold is counted to the first limit past that
# many edges, and a node needing more is counted whole.
COUNT_LIMITS: tuple[int, ...] = (8, 256, 4096)


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
        key = (cache_token(store), group, read_version(store, group), paths)
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
    growing edge list (each read node's rows contiguous: ``first[u]``, ``count[u]``).

    Rows from the store are turned into local indices and weights by C-level maps and numpy
    (no Python statement per row): a walk over a small, densely linked corpus reads every
    edge end of the typed graph, ~450,000 rows a question on MuSiQue."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        cap = 1024
        self.kind = np.zeros(cap, dtype=np.int8)  # _KINDS, 0 while not known
        self.r = np.zeros(cap)
        self.q = np.zeros(cap)
        self.deg = np.zeros(cap)
        self.known = np.zeros(cap)  # lower bound of the degree: edges to nodes already read
        self.floor = np.zeros(cap)  # lower bound of the degree: a count stopped at a limit, or type degrees
        self.counted = np.zeros(cap, dtype=bool)  # degree known (``deg``)
        self.typed = np.zeros(cap, dtype=bool)  # the store's type degrees seen (type_degrees, or a read's far ends)
        self.read = np.zeros(cap, dtype=bool)  # edges read (``first``, ``count``)
        self.first = np.zeros(cap, dtype=np.int64)
        self.count = np.zeros(cap, dtype=np.int64)
        self.nbr = np.zeros(cap, dtype=np.int64)  # the edge list: other end, weight
        self.wt = np.zeros(cap)
        self.edges = 0
        self.rows = 0
        self.queries = 0
        self.cached = 0  # degrees taken from the cache
        self.stopped = 0  # counts the store stopped at a limit (the degree left a lower bound)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def labels(self) -> list[str]:
        """Each node's label ("" where the walk never learnt it)."""
        names = ("", *WALK_LABELS)
        return [names[k] for k in self.kind[: len(self.ids)].tolist()]

    def touch(self, node_ids: Sequence[str], kinds: np.ndarray | None = None) -> np.ndarray:
        """Local indices of ``node_ids``, adding the new ones (of ``kinds``, when given)."""
        index = self.index
        out = np.fromiter(map(index.get, node_ids, repeat(-1)), dtype=np.int64, count=len(node_ids))
        new = np.flatnonzero(out < 0)
        if not len(new):
            return out
        start = len(self.ids)
        for k in new.tolist():  # each node is new once per walk: a loop over nodes, not rows
            x = node_ids[k]
            i = index.get(x)
            if i is None:
                i = index[x] = len(self.ids)
                self.ids.append(x)
            out[k] = i
        n = len(self.ids)
        (self.kind, self.r, self.q, self.deg, self.known, self.floor, self.counted, self.typed, self.read, self.first,
         self.count) = (
            _grown(a, n)
            for a in (self.kind, self.r, self.q, self.deg, self.known, self.floor, self.counted, self.typed, self.read,
                      self.first, self.count)
        )
        fresh = out[new] >= start
        if kinds is not None:
            self.kind[out[new][fresh]] = kinds[new][fresh]
        else:  # an entity id is ranked as one (as the route ranks it) before its label is read
            for k in new[fresh].tolist():
                if node_ids[k].startswith(ENTITY_ID_PREFIX):
                    self.kind[out[k]] = ENT_KIND
        return out

    def learn(self, nodes: np.ndarray, labels: dict[str, str]) -> None:
        """The kinds of ``nodes`` (local indices) from the labels a store call reported."""
        for i in nodes.tolist():
            label = labels.get(self.ids[i])
            if label:
                self.kind[i] = _KINDS.get(label, UNKNOWN)

    def lower(self, nodes: np.ndarray | slice) -> np.ndarray:
        """Each node's degree where it is known, else the best lower bound of it."""
        return np.where(self.counted[nodes], self.deg[nodes], np.maximum(self.known[nodes], self.floor[nodes]))

    def count_degrees(
        self,
        store: GraphStore,
        group: str,
        nodes: np.ndarray,
        paths: Paths,
        types: list[str],
        cache: dict[str, tuple[float, str]],
        enough: np.ndarray | None = None,
    ) -> None:
        """Learn the degrees of ``nodes`` (local indices) without reading their edges: from
        ``cache`` (this store version's degrees, kept between questions), from the store's
        type degrees (:func:`decided_degrees`) where it keeps them, or counted in the store.
        ``enough``: per node, a degree above which it is not pushed this round; a node whose
        type degrees already show that is not counted, and the store may stop counting its
        edges past it (``COUNT_LIMITS``). Such a node's degree stays unknown, with the bound
        as ``floor``: a hub the walk barely reaches costs a look-up or a few rows, not its
        thousands."""
        todo = []
        for i in nodes.tolist():
            hit = cache.get(self.ids[i])
            if hit is None:
                todo.append(i)
            else:
                self.deg[i], label = hit
                if label:
                    self.kind[i] = _KINDS.get(label, UNKNOWN)
                self.counted[i] = True
                self.cached += 1
        if not todo:
            return
        need_of = dict(zip(nodes.tolist(), enough.tolist(), strict=True)) if enough is not None else {}
        fresh = [i for i in todo if not self.typed[i]]
        typed = store.type_degrees(group, [self.ids[i] for i in fresh], types) if fresh else None
        if typed is not None:
            self.queries += 1
            self.typed[fresh] = True
            gone = np.setdiff1d(np.asarray(fresh, dtype=np.int64), self.take_typed(typed, paths, cache))
            self.counted[gone] = True  # asked, but not a node of the group: no edges (degree 0)
            # left to count: those whose bound does not show them above their threshold
            low = self.lower(np.asarray(todo, dtype=np.int64)).tolist()
            left = [i for i, lo in zip(todo, low, strict=True)
                    if not self.counted[i] and (i not in need_of or lo <= need_of[i])]
            self.stopped += len(todo) - len(left) - int(self.counted[todo].sum())  # settled by a bound
            todo = left
            if not todo:
                return
        w_min = paths.min_weight()
        if w_min <= 0:
            need_of = {}
        limits: dict[int | None, list[int]] = {}
        for i in todo:
            # more rows than this (each of weight >= w_min) prove the degree above ``enough``
            rows = int(need_of[i] / w_min) + 1 if i in need_of else None
            limit = next((c for c in COUNT_LIMITS if rows is not None and rows <= c), None)
            limits.setdefault(limit, []).append(i)
        for limit, part in limits.items():
            asked = [self.ids[i] for i in part]
            nc = store.neighbour_counts(group, asked, types, other_labels=WALK_LABELS, limit=limit)
            self.queries += 1
            self._settle(part, nc, paths, cache)

    def _settle(self, nodes: list[int], nc: NeighbourCounts, paths: Paths, cache: dict[str, tuple[float, str]]) -> None:
        """Take ``nodes``' degrees from counts: whole ones are known (and cached), those in
        ``capped`` (a count stopped at its limit) raise the node's lower bound (``floor``)."""
        found = degrees(nc, paths)
        self.learn(np.asarray(nodes, dtype=np.int64), nc.labels)
        for i in nodes:
            x = self.ids[i]
            if x in nc.capped:
                self.floor[i] = max(self.floor[i], found.get(x, 0.0))
                self.stopped += 1
                continue
            self.deg[i] = found.get(x, 0.0)
            self.counted[i] = True
            cache[x] = (self.deg[i], nc.labels.get(x) or "")

    def take_typed(self, td: TypeDegrees, paths: Paths, cache: dict[str, tuple[float, str]]) -> np.ndarray:
        """Degrees from the store's type degrees (:func:`decided_degrees`) for the walk's
        nodes in ``td`` whose degree is not known yet: whole ones become known (and cached),
        the others raise the node's lower bound (``floor``). Returns their local indices."""
        at = np.fromiter(map(self.index.get, td.ids, repeat(-1)), dtype=np.int64, count=len(td.ids))
        rows = np.flatnonzero(at >= 0)
        rows = rows[~self.counted[at[rows]]]
        at = at[rows]
        if len(rows) < len(td.ids):
            picked = rows.tolist()
            td = TypeDegrees(td.types, [td.ids[r] for r in picked], [td.labels[r] for r in picked], td.counts[rows])
        self.typed[at] = True
        self.kind[at] = _kinds(td.labels)
        deg, whole = decided_degrees(td, paths)
        known, bounded = at[whole], at[~whole]
        self.deg[known] = deg[whole]
        self.counted[known] = True
        self.floor[bounded] = np.maximum(self.floor[bounded], deg[~whole])
        settled = np.flatnonzero(whole).tolist()
        cache.update(
            (td.ids[r], (d, td.labels[r])) for r, d in zip(settled, deg[whole].tolist(), strict=True)
        )
        return at

    def load(
        self, store: GraphStore, group: str, nodes: np.ndarray, paths: Paths, types: list[str],
        cache: dict[str, tuple[float, str]],
    ) -> None:
        """Read the edges of ``nodes`` (local indices, degrees counted): the round's whole
        frontier in one store call (one statement on Neo4j up to its frontier batch), with
        the far ends' type degrees where the store keeps them (their degrees or bounds
        without a look-up of their own)."""
        asked = [self.ids[i] for i in nodes.tolist()]
        nb = store.neighbours(group, asked, types, other_labels=WALK_LABELS, far_types=types)
        self.queries += 1
        self.rows += len(nb)
        self.learn(nodes, nb.labels)
        n = len(nb)
        src = np.fromiter(map(self.index.__getitem__, nb.node), dtype=np.int64, count=n)  # asked: all known
        other_kind = _kinds(nb.other_label)
        w = _weights(_type_codes(nb.type), self.kind[src], other_kind, paths)
        keep = np.flatnonzero(w > 0)
        others = nb.other if len(keep) == n else np.asarray(nb.other, dtype=object)[keep].tolist()
        dst = self.touch(others, other_kind[keep])
        if nb.far is not None:
            self.take_typed(nb.far, paths, cache)
        src, w = src[keep], w[keep]
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

    def certificate(self, k: int, d: float) -> float:
        """How far the ranking may be from the exact one, as a share of the smallest score
        ranked (the ``k``-th best entity's or chunk's estimate; see the module docstring):
        the largest of (a) a ranked node's error bound, and (b) how far any node outside
        the ranking may rise above that smallest score. 0 when nothing is ranked."""
        n = len(self.ids)
        r = self.r[:n]
        est = self.q[:n] + r
        l1 = d * float(r.sum()) / (1.0 - d)  # the error's whole mass (unnormalised, as est)
        counted = self.counted[:n]
        lower = self.lower(slice(0, n))  # <= each touched node's degree
        has = lower > 0
        rho = float((r[has] / lower[has]).max()) if has.any() else 0.0  # r <= rho x degree everywhere
        err = np.where(counted, np.minimum(l1, d * rho * self.deg[:n] / (1.0 - d)), l1)
        kind = self.kind[:n]
        worst, smallest = 0.0, np.inf
        for wanted in (ENT_KIND, CHUNK_KIND):
            top = largest(est, np.flatnonzero((kind == wanted) & (est > 0)), k)
            if not len(top):
                continue
            floor = float(est[top].min())
            smallest = min(smallest, floor)
            worst = max(worst, float(err[top].max()) / floor)
            outside = ((kind == wanted) | (kind == UNKNOWN)) & (est > 0)
            outside[top] = False
            if outside.any():
                worst = max(worst, float((est[outside] + err[outside]).max()) / floor - 1.0)
        if not np.isfinite(smallest):
            return 0.0
        # a node the walk never reached has no estimate and scores at most the error's mass
        return max(worst, l1 / smallest - 1.0)

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
    ``min_eps``) until its ranking is certified within ``tolerance`` of the smaller of the
    ``top_k``-th best entity's and chunk's scores (:meth:`_Walk.certificate`)."""
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
        # the part of the graph already read is solved nearly exactly; only new nodes wait for eps
        cand = np.flatnonzero((r > 0) & (r >= walk.push_eps(slice(0, n), eps) * walk.lower(slice(0, n))))
        if not len(cand):
            if tolerance is None or eps <= min_eps or walk.certificate(top_k, d) <= tolerance:
                break
            eps = max(eps / 3.0, min_eps)
            continue
        uncounted = cand[~walk.counted[cand]]
        if len(uncounted):
            walk.count_degrees(store, group, uncounted, paths, types, cache, enough=walk.r[uncounted] / walk.push_eps(uncounted, eps))
            # their degrees (or counts stopped past the threshold) leave some below it
            cand = cand[walk.r[cand] >= walk.push_eps(cand, eps) * walk.lower(cand)]
            short = cand[~walk.counted[cand]]  # a stopped count that did not settle it
            if len(short):
                walk.count_degrees(store, group, short, paths, types, cache)
                cand = cand[walk.r[cand] >= walk.push_eps(cand, eps) * walk.deg[cand]]
        unread = cand[~walk.read[cand] & (walk.deg[cand] > 0)]
        if len(unread):
            walk.load(store, group, unread, paths, types, cache)
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
    ranked_error = walk.certificate(top_k, d)
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
        ranked_error=ranked_error,
        certified=None if tolerance is None else ranked_error <= tolerance,
        counts_stopped=walk.stopped,
    )


# The most edges one in-database push reads: a bound on a question's work, a few seconds of
# the server's (about a microsecond an edge end). The routes' pushes read tens of thousands;
# eps 1e-6 on the MuSiQue slice, 1.7 M.
MAX_PUSH_ROWS = 5_000_000


def push_in_database(
    store: GraphStore,
    group: str,
    seed_ids: Sequence[str],
    seed_weights: np.ndarray,
    paths: Paths,
    *,
    damping: float,
    eps: float,
    top_k: int = 10,
    spread: bool = False,
) -> LocalPPR | None:
    """:func:`push_pagerank`'s walk run inside the database by :meth:`GraphStore.push_pagerank`
    (the same thresholds, DRAIN included, and the same bound); None when the store cannot.
    Its ``ranked_error`` is the L1 bound over the smaller of the ``top_k``-th entity's and
    chunk's scores (no per-node bounds come back, so it is the looser of the two
    certificates). With ``spread``, the walk's scores come back with the remainder's spread
    (:func:`spread_remainder`) added in the database, which reads the pool's degrees where
    they are: no round trip for them (about 5 ms a question at a million sentences)."""
    plan = spread_plan(store, group, paths) if spread else None
    got = store.push_pagerank(
        group, list(seed_ids), np.asarray(seed_weights, dtype=np.float64).tolist(), types=paths.edge_types(),
        weights=asdict(paths), damping=damping, eps=eps, drain=DRAIN, max_rows=MAX_PUSH_ROWS, spread=plan,
    )
    if got is None:
        return None
    st = got.stats
    kinds = _kinds(got.labels)
    # the smallest score ranked: the top_k-th entity's or chunk's (or the last, with fewer)
    floors = [float(got.scores[top].min()) for wanted in (ENT_KIND, CHUNK_KIND)
              if len(top := largest(got.scores, np.flatnonzero((kinds == wanted) & (got.scores > 0)), top_k))]
    l1 = float(st.get("l1_error_bound", 0.0))
    return LocalPPR(
        ids=got.ids,
        labels=got.labels,
        scores=got.scores,
        rounds=int(st.get("rounds", 0)),  # a procedure older than the count says 0
        nodes_read=int(st.get("nodes_read", 0)),
        nodes_counted=int(st.get("nodes_counted", 0)),
        degrees_cached=0,
        queries=1,
        rows_read=int(st.get("rows_read", 0)),
        pushes=int(st.get("pushes", 0)),
        error_bound=float(st.get("error_bound", 0.0)),
        l1_error_bound=l1,
        residual=float(st.get("residual", 0.0)),
        seeds_in_graph=int(st.get("seeds_in_graph", 0)),
        nodes_pushed=int(st.get("nodes_read", 0)),
        eps=eps,
        ranked_error=l1 / min(floors) if floors else 0.0,  # 0 when nothing is ranked, as the client's
        certified=None,  # it runs to eps and certifies nothing
        counts_stopped=int(st.get("counts_stopped", 0)),
        in_database=True,
        truncated=bool(st.get("truncated", False)),
        spread_to=int(st.get("spread_to", 0)),
        volume=float(plan["volume"]) if plan is not None else None,
        server_timings={k: float(st[k]) for k in ("seeds_ms", "walk_ms", "server_ms") if k in st},
    )


# How many nodes of each ranked kind (entities, chunks) get the remainder's share: the best
# by the push's own estimate. A hub's mass is mostly remainder, so before the spread it may
# rank far below its exact place: with 30 a kind, route5_unified's entity top 10 on MuSiQue
# agreed 0.91 with the exact solve's, with 100 0.955 (0.963 spreading over every node).
SPREAD_POOL = 100


def type_totals(store: GraphStore, group: str, paths: Paths) -> TypeDegrees | None:
    """:meth:`GraphStore.type_totals` of the walk's labels and types, counted once per store
    version; None when the store cannot count them."""
    types = sorted(paths.edge_types())
    return per_version(store, group, ("type_totals", tuple(types)), lambda: store.type_totals(group, types, WALK_LABELS))


def graph_volume(store: GraphStore, group: str, paths: Paths) -> float | None:
    """The volume of the group's typed graph (every node's weighted degree, summed); None
    when the store cannot count it."""
    td = type_totals(store, group, paths)
    return None if td is None else volume(td, paths)


def _edge_weight(edge_type: str, label: str, far: str, paths: Paths) -> float:
    """:func:`_weights` of one edge of ``edge_type`` between a ``label`` node and a ``far`` one."""
    code = np.array([_CODES.get(edge_type, 0)], dtype=np.int8)
    return float(_weights(code, _kinds([label]), _kinds([far]), paths)[0])


def volume(td: TypeDegrees, paths: Paths) -> float:
    """The typed graph's volume from per-label type totals: each type counted at the ends
    whose label decides the far end (``OTHER_END``); where only one end's label does (a
    chunk's MENTIONS lead to entities, an entity's may come from sentences), that end's
    count stands for both ends of the edge."""
    total = 0.0
    for i, label in enumerate(td.labels):
        for j, t in enumerate(td.types):
            far = OTHER_END.get((label, t))
            if far is None:
                continue
            ends = 1 if (far, t) in OTHER_END else 2
            total += _edge_weight(t, label, far, paths) * float(td.counts[i, j]) * ends
    return total


def degree_weights(totals: TypeDegrees | None, paths: Paths) -> dict[str, dict[str, float]]:
    """The weight an edge end of each type adds to a node's degree in the remainder's
    spread, by the node's label: the edge's weight where the label decides the far end
    (``OTHER_END``), else the expected weight from :func:`undecided_shares` (an entity's
    MENTIONS, some from sentences). A node's spread degree is its relationship count of
    each type times these, :func:`node_degrees` in the client and the procedure alike."""
    shares = undecided_shares(totals, paths) if totals is not None else {}
    out: dict[str, dict[str, float]] = {}
    for label in WALK_LABELS:
        row = {}
        for t in sorted(paths.edge_types()):
            far = OTHER_END.get((label, t))
            w = _edge_weight(t, label, far, paths) if far is not None else shares.get((label, t), 0.0)
            if w > 0:
                row[t] = w
        out[label] = row
    return out


def spread_plan(store: GraphStore, group: str, paths: Paths) -> dict[str, Any] | None:
    """What :meth:`GraphStore.push_pagerank` needs to spread the remainder itself: the
    graph's volume, the pool size and :func:`degree_weights`; None when the store cannot
    count the graph's volume (and then nothing is spread)."""
    totals = type_totals(store, group, paths)
    vol = None if totals is None else volume(totals, paths)
    if not vol:
        return None
    return {"volume": vol, "pool": SPREAD_POOL, "weights": degree_weights(totals, paths)}


def spread_remainder(store: GraphStore, group: str, res: LocalPPR, paths: Paths) -> LocalPPR:
    """``res`` with the walk mass of what the push left unpushed spread over the graph in
    proportion to degree, the walk's stationary distribution on an undirected graph.

    The push's scores ``(q + r) / Z`` miss ``l1_error_bound`` of mass in all, the walks
    still to take from the residual. On a graph where those walks mix before they stop (the
    damping's mean walk of ``1 / (1 - d)`` steps), each node ends with its degree's share of
    that mass: ``l1_error_bound x deg(v) / vol``. A hub gains most, and a hub is where the
    push errs most (its residual threshold grows with its degree). With a node's own degree
    its share is at most its ``error_bound x deg(v)`` (every residual is below ``eps`` times
    its degree), so its score stays within that bound of the exact one, now on either side.
    Given to the ``SPREAD_POOL`` best entities and chunks, by :func:`node_degrees`, the same
    whichever engine walked; no spread when the store cannot count the graph's volume."""
    vol = graph_volume(store, group, paths)
    if not vol or res.l1_error_bound <= 0 or not len(res.ids):
        return res
    kinds = _kinds(res.labels)
    ent = np.fromiter((x.startswith(ENTITY_ID_PREFIX) for x in res.ids), dtype=bool, count=len(res.ids))
    kinds[(kinds == UNKNOWN) & ent] = ENT_KIND
    pool = np.concatenate([
        largest(res.scores, np.flatnonzero((kinds == kind) & (res.scores > 0)), SPREAD_POOL) for kind in (ENT_KIND, CHUNK_KIND)
    ]).astype(np.int64)
    deg = node_degrees(store, group, [res.ids[i] for i in pool.tolist()], paths)
    scores = res.scores.copy()
    scores[pool] += res.l1_error_bound * deg / vol
    return replace(res, scores=scores, spread_to=len(pool), volume=vol)


def node_degrees(store: GraphStore, group: str, ids: Sequence[str], paths: Paths) -> np.ndarray:
    """The weighted degrees of ``ids`` in the typed graph as the remainder's spread weighs
    them; 0 for an id not in the group. From the degree cache, else from the store's type
    degrees where it keeps them (look-ups, no edge read): whole where the node's label
    decides every far end (a chunk's); for an entity, its MENTIONS counted at the group's
    share of MENTIONS ends that come from chunks, not sentences (:func:`undecided_shares`),
    an estimate whose sum over the group is exact - counting a hub's mentions whole reads
    its tens of thousands of edges (about 60 ms a question at a million sentences). Counted
    whole in the store where it keeps no type degrees."""
    cache = _DEGREES.of(store, group, paths)
    missing = [x for x in dict.fromkeys(ids) if x not in cache]
    typed = store.type_degrees(group, missing, paths.edge_types()) if missing else None
    estimated: dict[str, float] = {}
    if typed is not None:
        _, whole = decided_degrees(typed, paths)
        table = degree_weights(type_totals(store, group, paths), paths)
        for r, (x, label) in enumerate(zip(typed.ids, typed.labels, strict=True)):
            w = table.get(label, {})
            deg = sum(w[t] * float(typed.counts[r, j]) for j, t in enumerate(typed.types) if t in w)
            if whole[r]:
                cache[x] = (deg, label)
            else:
                estimated[x] = deg
        for x in set(missing).difference(typed.ids):  # not a node of the group
            cache[x] = (0.0, "")
        missing = []
    if missing:
        nc = store.neighbour_counts(group, missing, paths.edge_types(), other_labels=WALK_LABELS)
        counted = degrees(nc, paths)
        for x in missing:
            cache[x] = (counted.get(x, 0.0), nc.labels.get(x) or "")
    return np.array([estimated[x] if x in estimated else cache[x][0] for x in ids], dtype=np.float64)


def undecided_shares(totals: TypeDegrees, paths: Paths) -> dict[tuple[str, str], float]:
    """For each (label, type) whose far end the label does not decide (an entity's MENTIONS),
    the weight an edge end of it adds to a degree on average: the type's weight toward the
    walk's label that decides it from the other side (chunks mention entities), times the
    share of the label's ends of that type that come from there (the chunks' MENTIONS over
    all the entities' MENTIONS, sentences' included)."""
    out: dict[tuple[str, str], float] = {}
    row = {label: i for i, label in enumerate(totals.labels)}
    for label, i in row.items():
        for j, t in enumerate(totals.types):
            ends = float(totals.counts[i, j])
            if (label, t) in OTHER_END or ends <= 0:
                continue
            for far, k in row.items():
                if OTHER_END.get((far, t)) == label:
                    w = _edge_weight(t, label, far, paths)
                    out[(label, t)] = out.get((label, t), 0.0) + w * float(totals.counts[k, j]) / ends
    return out


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
    paths = Paths(**asdict(w))
    res = None
    # a certified push ranks by the estimate its certificate is about: no spread
    spread = p.push_tolerance is None and p.push_remainder == "degree"
    if p.push_engine == "auto" and p.push_tolerance is None:
        res = push_in_database(store, state.group, seed_ids, seed_weights, paths, damping=damping, eps=p.push_eps,
                               top_k=p.top_k, spread=spread)
    if res is None:
        res = push_pagerank(store, state.group, seed_ids, seed_weights, paths, damping=damping, eps=p.push_eps,
                            tolerance=p.push_tolerance, top_k=p.top_k)
        if spread:
            res = spread_remainder(store, state.group, res, paths)
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
    engine = (
        "forward push inside the database (graphroute.push)" if res.in_database
        else f"forward push, reads from the {getattr(store, 'backend', '') or 'store'} store"
    )
    ctx.stats.update(
        {
            "solver": "push",
            "engine": engine,
            "converged": True,
            "certified": res.certified,
            "ranked_error": round(res.ranked_error, 6),
            "eps": res.eps,
            "error_bound": res.error_bound,
            "l1_error_bound": round(res.l1_error_bound, 8),
            "remainder_spread_to": res.spread_to,
            "graph_volume": res.volume,
            "nodes_touched": res.nodes_touched,
            "nodes_read": res.nodes_read,
            "degrees_counted": res.nodes_counted - res.degrees_cached,
            "counts_stopped": res.counts_stopped,
            "truncated": res.truncated,
            "queries": res.queries,
            "rows_read": res.rows_read,
            "rounds": res.rounds,
            "pushes": res.pushes,
            "seeds_in_graph": res.seeds_in_graph,
            "entities_ranked": len(top),
            "entities_kept": len(chosen),
            "budget_mass": round(sum(float(scores[i]) for i in chosen) / max(ranked_mass, 1e-300), 4),
            "top": [{"entity": e.name or e.id, "score": round(e.score, 6)} for e in state.entities[:5]],
            **(res.server_timings or {}),  # where the server's time went, for the in-database push
        }
    )
