"""What :meth:`graphroute.core.store.GraphStore.neighbours` returns: the edges around some
nodes, read a frontier at a time by algorithms that walk the graph (local PageRank) instead
of exporting a whole group."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from .models import Edge, Node


@dataclass(frozen=True)
class Neighbourhood:
    """The edges around some nodes, as :meth:`GraphStore.neighbours` returns them: one row
    per (asked node, edge) in either direction, in parallel lists (a row per edge end, not
    an :class:`Edge` object: a walk reads thousands and needs four strings of each).

    An edge between two asked nodes appears once from each end; edges in both directions
    between the same pair appear twice, as an undirected export counts them. Self-loops are
    left out."""

    labels: dict[str, str]  # label of every asked id that is a node of the group
    node: list[str] = field(default_factory=list)  # the asked node of the row
    type: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # the edge's other end
    other_label: list[str] = field(default_factory=list)
    other_doc: list[str | None] = field(default_factory=list)
    # the far ends' type degrees (as GraphStore.type_degrees gives them), when a read asked
    # for them (``far_types``) and the backend keeps such degrees; else None
    far: TypeDegrees | None = None

    def __len__(self) -> int:
        return len(self.node)

    def add(self, node: str, type: str, other: str, other_label: str, other_doc: str | None) -> None:
        """Append one row: the edge of ``type`` from asked ``node`` to ``other``."""
        self.node.append(node)
        self.type.append(type)
        self.other.append(other)
        self.other_label.append(other_label)
        self.other_doc.append(other_doc)

    def add_columns(
        self, node: str, type: Sequence[str], other: Sequence[str], other_label: Sequence[str], other_doc: Sequence[str | None],
    ) -> None:
        """Append the rows of one asked ``node``, given as columns (no Python step per row)."""
        self.node.extend(repeat(node, len(type)))
        self.type.extend(type)
        self.other.extend(other)
        self.other_label.extend(other_label)
        self.other_doc.extend(other_doc)

    def add_rows(self, rows: Sequence[tuple[str, str, str, str, str | None]]) -> None:
        """Append many rows of (node, type, other, other_label, other_doc) at once, a column
        at a time: a store reads them by the hundred thousand (a local walk's frontier)."""
        if not rows:
            return
        node, type_, other, other_label, other_doc = zip(*rows, strict=True)
        self.node.extend(node)
        self.type.extend(type_)
        self.other.extend(other)
        self.other_label.extend(other_label)
        self.other_doc.extend(other_doc)


@dataclass(frozen=True)
class NeighbourCounts:
    """How many edges each asked node has, per (edge type, label of the other end): what
    :meth:`GraphStore.neighbour_counts` returns, a node's degree without its edges (or, for a
    node in ``capped``, the first ``limit`` of them)."""

    labels: dict[str, str]  # label of every asked id that is a node of the group
    counts: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)  # node -> (type, other label, n)
    # nodes whose counting stopped at the ``limit`` asked for: their counts are a lower bound
    capped: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class TypeDegrees:
    """Each node's number of edges of each of ``types``, in either direction and whatever the
    other end: ``counts[i, j]`` edges of ``types[j]`` at ``ids[i]``, whose label is
    ``labels[i]``. What :meth:`GraphStore.type_degrees` returns, and the far ends of a read
    (:attr:`Neighbourhood.far`): a table, not rows per node, because a walk's read brings
    thousands of far ends and takes them in a few array operations."""

    types: tuple[str, ...]
    ids: list[str]  # the asked ids that are nodes of the group, each once
    labels: list[str]
    counts: np.ndarray  # int64, shape (len(ids), len(types))

    @classmethod
    def of(cls, types: Sequence[str], found: Mapping[str, tuple[str, Sequence[int]]]) -> TypeDegrees:
        """From ``{id: (label, counts in the order of types)}``."""
        rows = list(found.values())
        counts = np.array([c for _, c in rows], dtype=np.int64).reshape(len(rows), len(types))
        return cls(tuple(types), list(found), [str(lb) for lb, _ in rows], counts)

    def row(self, node: str) -> dict[str, int]:
        """``node``'s types with at least one edge, and how many (empty when not a node)."""
        if node not in self.ids:
            return {}
        counts = self.counts[self.ids.index(node)].tolist()
        return {t: n for t, n in zip(self.types, counts, strict=True) if n}


def counts_of(nb: Neighbourhood) -> NeighbourCounts:
    """The :class:`NeighbourCounts` of the rows of ``nb``."""
    tally: dict[str, dict[tuple[str, str], int]] = {}
    for a, t, lb in zip(nb.node, nb.type, nb.other_label, strict=True):
        per = tally.setdefault(a, {})
        per[(t, lb)] = per.get((t, lb), 0) + 1
    return NeighbourCounts(dict(nb.labels), {a: [(t, lb, n) for (t, lb), n in sorted(per.items())] for a, per in tally.items()})


def neighbourhood_of(
    asked: Sequence[str],
    labels: Mapping[str, str],
    edges: Iterable[Edge],
    others: Mapping[str, Node],
    other_labels: Collection[str] | None,
    first_docs: int | None,
) -> Neighbourhood:
    """A :class:`Neighbourhood` from plain edges and the nodes at their ends: the default
    :meth:`GraphStore.neighbours`, and the reference the backends' own queries are tested
    against."""
    wanted = set(asked)
    allowed = None if other_labels is None else {str(x) for x in other_labels}
    rows: dict[str, list[tuple[str, str, str, str | None]]] = {}
    for e in edges:
        if e.src == e.dst:
            continue
        for a, b in ((e.src, e.dst), (e.dst, e.src)):
            nb = others.get(b)
            if a in wanted and nb is not None and (allowed is None or nb.label in allowed):
                rows.setdefault(a, []).append((str(e.type), b, str(nb.label), nb.doc_id))
    out = Neighbourhood(dict(labels))
    for a in dict.fromkeys(asked):
        mine = rows.get(a, [])
        if first_docs is not None:
            docs = sorted({d for *_, d in mine if d is not None})[:first_docs]
            keep = set(docs)
            mine = [r for r in mine if r[3] in keep]
        for t, b, lb, d in mine:
            out.add(a, t, b, lb, d)
    return out


@dataclass(frozen=True)
class PushedScores:
    """What :meth:`GraphStore.push_pagerank` returns: a personalised PageRank by forward push
    that ran inside the database. ``scores[i]`` is node ``ids[i]``'s score (``(q + r) / Z``,
    as the client push computes it; nodes the walk touched, those above zero), ``labels[i]``
    its label; ``stats`` the walk's figures (``nodes_touched``, ``nodes_read``,
    ``rows_read``, ``pushes``, ``residual``, ``error_bound``, ``l1_error_bound``,
    ``truncated``, ``seeds_in_graph``, ``server_ms``)."""

    ids: list[str]
    labels: list[str]
    scores: np.ndarray
    stats: Mapping[str, float | int | bool]

