"""Graph expanders: personalized PageRank over typed edge paths, and entity -> chunks.

Route 2 (route2 reference §2) and Route 5 (route5 §2.4) share one PPR pass. The predecessor
ran PPR in Cypher over five typed "paths"; graphroute runs it in Python on the sparse
adjacency every store exports (:func:`graphroute.core.lib.graph.adjacency`), so both backends
rank identically.

**The five paths, mapped to our index** (the reference's edge names in parentheses):

=================  ========================================================  ===============
parameter          edges of our index                                        reference path
=================  ========================================================  ===============
``weight_entity``  RELATION, CO_OCCURS (Entity <-> Entity)                   1 entity-entity
``weight_section`` SEMANTICALLY_SIMILAR between Sections                     2 section hops
``weight_similar`` SEMANTICALLY_SIMILAR between Entities (kNN 0.60)          3 entity kNN
``weight_shares``  SHARES_ENTITY (Section <-> Section, different documents)  4 cross-document
``weight_hub``     HAS_HUB_ENTITY (Section -> Entity)                        5 hub entities
=================  ========================================================  ===============

The reference's ``APPEARS_IN_SECTION`` (Entity -> Section) that paths 2, 4 and 5 walk through
does not exist in our index; its equivalent is ``Entity <-MENTIONS- TextChunk -IN_SECTION->
Section``. Those connector edges (chunk-sourced MENTIONS and IN_SECTION) carry their own
``weight_mentions``. So the PPR graph holds Entity, TextChunk and Section nodes; only
entities are ranked. Sentence-sourced MENTIONS are left out: they duplicate the chunk ones.
``weight_title`` (off in the reference's graph) weights OWN_PAGE, TextChunk -> the Entity its
document's title names.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from graphroute.core.api.models import EdgeType, Evidence, Label, Node, ScoredNode
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.api.store import GraphStore, counted_nodes, per_version
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.deadline import check_deadline
from graphroute.core.lib.entities import (
    OWN_PAGES_META,
    is_entity_id,
    own_page_entity,
)
from graphroute.core.lib.graph import adjacency
from graphroute.core.lib.layout import boxes_in, layout_of
from graphroute.core.lib.topk import largest, ranked_top
from pydantic import Field

from .mentions import chunks_in_order

if TYPE_CHECKING:  # scipy is imported where it multiplies: the CLI starts without it
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

DEFAULT_DAMPING = 0.85
DEFAULT_PUSH_EPS = 1e-4  # where the push starts (push_eps)
MIN_PUSH_EPS = 1e-7  # where push_tolerance stops lowering it

# --------------------------------------------------------------------------- node sets


def node_ids(store: GraphStore, group: str, label: str) -> frozenset[str]:
    """Ids of every node of ``label`` in the group, cached per store version (the PPR graph
    and entity_chunks need to tell chunks from sentences among MENTIONS sources)."""
    return per_version(store, group, ("node_ids", label), lambda: frozenset(n.id for n in store.iter_nodes(group, label)))


# --------------------------------------------------------------------------- the typed graph


@dataclass(frozen=True)
class PathWeights:
    entity: float = 1.0
    section: float = 1.0
    similar: float = 1.0
    shares: float = 1.0
    hub: float = 1.0
    mentions: float = 1.0
    title: float = 0.0

    def key(self) -> tuple[float, ...]:
        return (self.entity, self.section, self.similar, self.shares, self.hub, self.mentions, self.title)


_FACTORS_KEPT = 4  # LU factorisations a TypedGraph keeps, one per damping, least recently used dropped


# A sparse part with at least this many non-zeros is multiplied in two row blocks on two
# threads (scipy's mat-vec releases the GIL). Measured:
# 100k synthetic sentences' route 2 graph, 1.79 M non-zeros, 1.919 -> 1.24 ms a mat-vec;
# MuSiQue's 572k, 0.460 -> 0.447 ms, where handing half to a thread gains nothing.
PARALLEL_NNZ = 1_000_000
_matvec_pool: ThreadPoolExecutor | None = None
_matvec_pool_lock = threading.Lock()


def _second_core() -> ThreadPoolExecutor:
    """The one worker thread that multiplies the second row block of large graphs."""
    global _matvec_pool
    with _matvec_pool_lock:
        if _matvec_pool is None:
            _matvec_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphroute-matvec")
        return _matvec_pool


def row_blocks(matrix: sp.csr_matrix) -> tuple[sp.csr_matrix, ...]:
    """``matrix`` as one block, or as two row blocks of about equal non-zeros when it is
    large enough (``PARALLEL_NNZ``) for a second thread to pay. Each row's products are
    summed in the same order either way, so the result is the same to the bit."""
    if matrix.nnz < PARALLEL_NNZ or matrix.shape[0] < 2:
        return (matrix,)
    cut = int(np.searchsorted(matrix.indptr, matrix.nnz // 2))
    cut = min(max(cut, 1), matrix.shape[0] - 1)
    return (matrix[:cut].tocsr(), matrix[cut:].tocsr())


def _torch_csr(matrix: sp.csr_matrix) -> Any | None:
    """``matrix`` as a torch sparse CSR tensor sharing its arrays, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    index = np.int32 if max(matrix.nnz, *matrix.shape) < 2**31 else np.int64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR tensor support is in beta state"
        return torch.sparse_csr_tensor(
            torch.from_numpy(matrix.indptr.astype(index, copy=False)),
            torch.from_numpy(matrix.indices.astype(index, copy=False)),
            torch.from_numpy(np.ascontiguousarray(matrix.data, dtype=np.float64)),
            size=matrix.shape,
        )


class SparseProduct:
    """``matrix @ v`` for a fixed CSR matrix (not to be changed afterwards: the tensor shares
    its arrays), by torch's sparse product on its thread pool when torch is installed (the
    local models bring it), else by scipy on this thread.

    Why: CG's time is its mat-vecs (~25 a question on route 2), and scipy multiplies on one
    thread; below ``PARALLEL_NNZ`` a Python worker thread costs about what it saves. torch
    (MKL) splits the rows over the OpenMP threads the question's embedding uses, which hand
    over cheaply. MuSiQue's route 2 graph (249k non-zeros plus the 2 x 27k of its co-mention
    product): 418 -> 251 us a product alone, route2_local's `ppr` p50 14.27 / 14.59 -> 12.75 /
    12.55 ms in the query suite. Above
    ``PARALLEL_NNZ`` the two scipy row blocks stay: on the 100k synthetic graph (1.79 M
    non-zeros) torch's product was faster alone but slower inside CG (route2_local's solve
    29.21 against 25.30 ms p50).

    Each row is summed by one thread in a fixed order, so the product does not depend on the
    number of threads; it differs from scipy's in the last bits (~1e-16 relative), as the
    rows' terms are added in another grouping."""

    def __init__(self, matrix: sp.csr_matrix) -> None:
        self.matrix = matrix
        self._tensor = _torch_csr(matrix)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        if self._tensor is None:
            return np.asarray(self.matrix @ v)
        import torch

        return (self._tensor @ torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64))).numpy()


@dataclass(frozen=True)
class SymmetricForm:
    """The PPR system in symmetric form: ``S = D^-1/2 A D^-1/2`` as ``sparse + low @ low.T``,
    ``root`` the square roots of the degrees (0 for isolated nodes) and ``inv_root`` their
    inverses (0 there too).

    ``sparse`` is held as row blocks (:func:`row_blocks`: two for a large graph, multiplied by
    scipy on two threads; one otherwise, multiplied by a :class:`SparseProduct`). ``low`` is
    None unless the graph's co-occurrence cliques were worth storing as a product
    (:func:`co_mention_form`); then ``sparse`` holds every other entry."""

    sparse: tuple[sp.csr_matrix, ...]
    low: SparseProduct | None
    low_t: SparseProduct | None
    root: np.ndarray
    inv_root: np.ndarray
    _one: SparseProduct | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_one", SparseProduct(self.sparse[0]) if len(self.sparse) == 1 else None)

    def times(self, v: np.ndarray) -> np.ndarray:
        """``S @ v``."""
        if self._one is not None:
            out = self._one(v)
        else:
            first, second = self.sparse
            other = _second_core().submit(second.__matmul__, v)
            out = np.concatenate([np.asarray(first @ v), np.asarray(other.result())])
        if self.low is not None and self.low_t is not None:
            out += self.low(self.low_t(v))
        return out


def co_mention_form(
    adjacency: sp.csr_matrix, mentions: sp.csr_matrix, weight: float, inv_root: np.ndarray
) -> tuple[sp.csr_matrix, sp.csr_matrix] | None:
    """``D^-1/2 A D^-1/2`` as ``(sparse, low)`` with ``sparse + low @ low.T`` equal to it,
    when that stores fewer numbers; else None.

    Why: entities that co-occur in a chunk are linked pairwise (CO_OCCURS, weight
    ``weight``), so a chunk naming k entities adds k(k-1) entries to the matrix, most of
    route 2's graph (467k of 572k non-zeros on MuSiQue). With ``M`` the 0/1 entity x chunk
    incidence of the chunks' MENTIONS, those cliques are ``weight * (M M^T - diag)``:
    2 x 27k numbers instead of 434k. ``sparse`` keeps the exact remainder, ``A - weight *
    (M M^T - diag)`` (pairs linked in several chunks, pairs a chunk did not link, the
    other paths), so the product is the same matrix whatever built the edges; a CG pass
    over it reads half the memory and the solve keeps its iterations and its result to
    the last bits (``/tmp/exp/lr_full.py``: L1 difference <= 2.5e-16).

    The form is used only when it stores at most three quarters of ``A``'s non-zeros, the
    extra products costing a pass over the vector each. Before that, forming ``M M^T`` is
    only tried when the chunks' pair instances (sum of k(k-1)) are no more than ``A``'s
    entries, so the attempt never holds more than another copy of ``A``. Past that, pairs
    recur across chunks, and a recurring pair is a remainder entry (its edge has one weight,
    the product counts it once per chunk): the 10k synthetic corpus has 597,668 pair
    instances for 384,062 entries and its form would store 81%; MuSiQue 459,638 for 572,262."""
    import scipy.sparse as sp
    n_full = adjacency.nnz
    if weight <= 0 or not mentions.nnz or not n_full:
        return None
    pattern = mentions.tocsr(copy=True)
    pattern.eliminate_zeros()  # rows masked out by a zero scale are not mentions
    pattern.data[:] = 1.0
    per_chunk = np.diff(pattern.tocsc().indptr).astype(np.float64)
    if float((per_chunk * (per_chunk - 1.0)).sum()) > n_full:
        return None
    pairs = (pattern @ pattern.T).tocsr()
    counts = pairs.diagonal()
    pairs.setdiag(0)
    pairs.eliminate_zeros()
    rest = (adjacency - weight * pairs).tocsr()
    rest.eliminate_zeros()
    if rest.nnz + len(counts) + 2 * pattern.nnz > 0.75 * n_full:
        return None
    scale = sp.diags(inv_root)
    sparse = (scale @ rest @ scale - sp.diags(weight * counts * inv_root * inv_root)).tocsr()
    sparse.eliminate_zeros()
    low = (scale @ pattern).tocsr() * np.sqrt(weight)
    return sparse, low


@dataclass(frozen=True)
class TypedGraph:
    """The PPR graph: sorted node ids, a symmetric weighted adjacency and its
    column-normalised transition matrix."""

    ids: tuple[str, ...]
    index: Mapping[str, int]
    adjacency: sp.csr_matrix
    transition: sp.csr_matrix
    dangling: np.ndarray  # bool per node: no edges
    is_entity: np.ndarray  # bool per node
    # bool per node: a TextChunk, whose MENTIONS edges (the adjacency's entity x chunk
    # entries) imply its entities' co-occurrence edges of weight ``co_weight``
    # (:func:`co_mention_form`); None when the graph was built without that knowledge
    is_chunk: np.ndarray | None = None
    co_weight: float = 0.0
    _factors: dict[float, spla.SuperLU] = field(default_factory=dict, compare=False, repr=False)
    _factor_lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def edges(self) -> int:
        return int(self.adjacency.nnz // 2)

    @cached_property
    def symmetric(self) -> SymmetricForm:
        """``D^-1/2 A D^-1/2`` and the degrees it was scaled by, made on first use for the
        life of this graph: the conjugate-gradient solver needs a symmetric system, and
        ``I - d P`` is one after a diagonal change of variables because ``A`` is symmetric."""
        import scipy.sparse as sp
        deg = np.asarray(self.adjacency.sum(axis=0)).ravel()
        root = np.sqrt(deg)
        inv_root = np.divide(1.0, root, out=np.zeros_like(root), where=root > 0)
        if self.is_chunk is not None and self.is_chunk.any() and self.co_weight > 0:
            # the chunks' MENTIONS are the adjacency's entity x chunk entries: read them there
            # on first use rather than at build time, so a graph solved by LU never pays
            mentions = (sp.diags(self.is_entity.astype(np.float64)) @ self.adjacency[:, self.is_chunk]).tocsr()
            split = co_mention_form(self.adjacency, mentions, self.co_weight, inv_root)
            if split is not None:
                sparse, low = split
                return SymmetricForm(row_blocks(sparse), SparseProduct(low), SparseProduct(low.T.tocsr()), root, inv_root)
        scale = sp.diags(inv_root)
        return SymmetricForm(row_blocks((scale @ self.adjacency @ scale).tocsr()), None, None, root, inv_root)

    def factor(self, damping: float) -> tuple[spla.SuperLU, bool]:
        """The sparse LU factors of ``I - damping * P``, made once per damping for the life
        of this graph (i.e. until the next write); the flag says whether this call made them.

        The ordering is minimum degree on ``A + A^T``: the adjacency is symmetric, and on a
        MuSiQue-sized graph (22k nodes, 456k non-zeros) it keeps the factors at ~1.1 M
        non-zeros (~0.15 s to make), where scipy's default COLAMD filled in 101 M (80 s).
        Route 5 picks its damping per question from a few profiles, so a few are kept, the
        least recently used dropped first: on 100 MuSiQue questions Route 5 used five dampings,
        two of them for 92 questions, and dropping the oldest-made instead re-made a busy one
        (8 factorisations of ~0.12 s against 6)."""
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla
        with self._factor_lock:
            hit = self._factors.pop(damping, None)
            if hit is not None:
                self._factors[damping] = hit  # now the most recently used
                return hit, False
            n = self.transition.shape[0]
            system = (sp.identity(n, format="csc") - damping * self.transition).tocsc()
            lu = spla.splu(system, permc_spec="MMD_AT_PLUS_A")
            if len(self._factors) >= _FACTORS_KEPT:
                self._factors.pop(next(iter(self._factors)))
            self._factors[damping] = lu
            return lu, True


def _view_parts(
    store: GraphStore, group: str, edge_type: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row ids, col ids, weights, view ids) of one edge type's exported adjacency."""
    view = adjacency(store, group, {edge_type: 1.0})
    coo = view.matrix.tocoo()
    ids = np.asarray(view.ids, dtype=object)
    return coo.row, coo.col, coo.data, ids


def transition_matrix(adj: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """Column-normalise a symmetric adjacency: ``P[i, j] = A[i, j] / deg(j)``; dangling
    columns (no edges) stay zero and are reported so PPR sends their mass to the seeds."""
    import scipy.sparse as sp
    deg = np.asarray(adj.sum(axis=0)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg, dtype=np.float64), where=deg > 0)
    return (adj @ sp.diags(inv)).tocsr(), deg <= 0


def has_own_pages(store: GraphStore, group: str) -> bool:
    """Whether the group's own-page links are OWN_PAGE edges in the store (written by the
    entity_graph index step); False for a group indexed before they existed."""
    return per_version(store, group, "own_pages_written", lambda: store.get_meta(group, OWN_PAGES_META) is not None)


def title_pairs(store: GraphStore, group: str) -> list[tuple[str, str]]:
    """(entity id, chunk id) for every chunk whose document title names an entity of the
    group (:func:`~graphroute.core.lib.entities.own_page_entity`), read from the chunks'
    titles: the own-page links of a group indexed before the entity_graph step wrote them
    as OWN_PAGE edges. Built once per store version."""

    def build() -> list[tuple[str, str]]:
        entities = node_ids(store, group, Label.ENTITY)
        out: list[tuple[str, str]] = []
        for node in store.iter_nodes(group, Label.CHUNK):
            hit = own_page_entity(str(node.props.get("title") or node.props.get("document") or ""), entities)
            if hit is not None:
                out.append((hit, node.id))
        return sorted(out)

    return per_version(store, group, "title_pairs", build)


def typed_graph(store: GraphStore, group: str, weights: PathWeights) -> TypedGraph:
    """The five-path PPR graph of a group, built once per store version (with the LU
    factors the direct solver makes on it, it is dropped by the next write)."""
    return per_version(store, group, ("typed_graph", weights.key()), lambda: _build_typed_graph(store, group, weights))


def _build_typed_graph(store: GraphStore, group: str, weights: PathWeights) -> TypedGraph:
    import scipy.sparse as sp
    chunks = node_ids(store, group, Label.CHUNK) if weights.entity or weights.mentions or weights.section or weights.shares or weights.hub or weights.title else frozenset()
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []

    def add(edge_type: str, w: float, keep: Any) -> None:
        if not w:
            return
        r, c, d, ids = _view_parts(store, group, edge_type)
        if not len(d):
            return
        ri, ci = ids[r], ids[c]
        mask = np.fromiter((keep(a, b) for a, b in zip(ri, ci, strict=True)), dtype=bool, count=len(d))
        rows.append(ri[mask])
        cols.append(ci[mask])
        vals.append(d[mask] * w)

    def both_entities(a: str, b: str) -> bool:
        return is_entity_id(a) and is_entity_id(b)

    def neither_entity(a: str, b: str) -> bool:
        return not is_entity_id(a) and not is_entity_id(b)

    def chunk_entity(a: str, b: str) -> bool:
        return (a in chunks and is_entity_id(b)) or (b in chunks and is_entity_id(a))

    def chunk_any(a: str, b: str) -> bool:
        return a in chunks or b in chunks

    def always(a: str, b: str) -> bool:
        return True

    add(EdgeType.RELATION, weights.entity, both_entities)
    add(EdgeType.CO_OCCURS, weights.entity, both_entities)
    if weights.similar or weights.section:
        r, c, d, ids = _view_parts(store, group, EdgeType.SEMANTICALLY_SIMILAR)
        if len(d):
            ri, ci = ids[r], ids[c]
            ent = np.fromiter((both_entities(a, b) for a, b in zip(ri, ci, strict=True)), dtype=bool, count=len(d))
            sec = np.fromiter((neither_entity(a, b) for a, b in zip(ri, ci, strict=True)), dtype=bool, count=len(d))
            for mask, w in ((ent, weights.similar), (sec, weights.section)):
                if w:
                    rows.append(ri[mask])
                    cols.append(ci[mask])
                    vals.append(d[mask] * w)
    add(EdgeType.SHARES_ENTITY, weights.shares, always)
    add(EdgeType.HAS_HUB_ENTITY, weights.hub, always)
    add(EdgeType.MENTIONS, weights.mentions, chunk_entity)
    add(EdgeType.IN_SECTION, weights.mentions, chunk_any)
    if weights.title and has_own_pages(store, group):
        add(EdgeType.OWN_PAGE, weights.title, chunk_entity)
    elif weights.title:
        pairs = title_pairs(store, group)
        if pairs:
            ents = np.asarray([e for e, _ in pairs], dtype=object)
            chks = np.asarray([c for _, c in pairs], dtype=object)
            rows += [ents, chks]
            cols += [chks, ents]
            vals += [np.full(len(pairs), weights.title), np.full(len(pairs), weights.title)]

    all_r = np.concatenate(rows) if rows else np.zeros(0, dtype=object)
    all_c = np.concatenate(cols) if cols else np.zeros(0, dtype=object)
    all_v = np.concatenate(vals) if vals else np.zeros(0, dtype=np.float64)
    ids_sorted = tuple(sorted(set(all_r.tolist()) | set(all_c.tolist())))
    index = {n: i for i, n in enumerate(ids_sorted)}
    n = len(ids_sorted)
    if n:
        ri = np.fromiter((index[x] for x in all_r), dtype=np.int64, count=len(all_r))
        ci = np.fromiter((index[x] for x in all_c), dtype=np.int64, count=len(all_c))
        # each exported view is already symmetric, so the sum is too
        adj = sp.coo_matrix((all_v.astype(np.float64), (ri, ci)), shape=(n, n)).tocsr()
        adj.sum_duplicates()
    else:
        adj = sp.csr_matrix((0, 0), dtype=np.float64)
    trans, dangling = transition_matrix(adj)
    is_ent = np.fromiter((is_entity_id(x) for x in ids_sorted), dtype=bool, count=n)
    is_chunk = np.fromiter((x in chunks for x in ids_sorted), dtype=bool, count=n)
    return TypedGraph(ids_sorted, index, adj, trans, dangling, is_ent, is_chunk, weights.entity)


# --------------------------------------------------------------------------- PPR


@dataclass
class PPRResult:
    scores: np.ndarray
    iterations: int
    converged: bool


def personalized_pagerank(
    transition: sp.spmatrix,
    teleport: np.ndarray,
    *,
    damping: float = DEFAULT_DAMPING,
    dangling: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> PPRResult:
    """Power iteration ``r = d * (P r + dangling mass * p) + (1 - d) * p``.

    ``transition`` is column-stochastic except for dangling columns; their mass teleports to
    the seeds (``p``), so the result stays a probability distribution. Pure numpy/scipy with
    a fixed iteration order: deterministic for a given graph and teleport vector.
    """
    p = np.asarray(teleport, dtype=np.float64)
    total = p.sum()
    if total <= 0:
        return PPRResult(np.zeros_like(p), 0, True)
    p = p / total
    dmask = dangling if dangling is not None else np.asarray(transition.sum(axis=0)).ravel() <= 0
    # the same update as written above, in place: a question's PPR is ~75 iterations over the
    # whole graph, and the temporaries of the plain expression cost a fifth of each one
    dangling_idx = np.flatnonzero(dmask)
    base = (1.0 - damping) * p
    r = p.copy()
    diff = np.empty_like(p)
    for it in range(1, max_iter + 1):
        check_deadline("ppr")
        r_new = transition @ r
        if len(dangling_idx):
            r_new += r[dangling_idx].sum() * p
        r_new *= damping
        r_new += base
        np.subtract(r_new, r, out=diff)
        np.abs(diff, out=diff)
        delta = float(diff.sum())
        r = r_new
        if delta < tol:
            return PPRResult(r, it, True)
    return PPRResult(r, max_iter, False)


def direct_pagerank(graph: TypedGraph, teleport: np.ndarray, *, damping: float = DEFAULT_DAMPING) -> tuple[np.ndarray, bool]:
    """The fixed point :func:`personalized_pagerank` iterates towards, by one sparse solve.

    With dangling mass sent to the seeds, the fixed point is ``r = d P r + c p`` for a scalar
    ``c``, so ``r`` is ``(I - d P)^-1 p`` scaled to sum to one. The factors of ``I - d P`` are
    made once per graph and damping (:meth:`TypedGraph.factor`), so a question costs two
    triangular solves: ~2.5 ms on MuSiQue's graph where the power iteration takes ~35 ms
    (74 mat-vecs), and the solve does not depend on how slowly the walk mixes.

    ``teleport`` covers ``graph.ids`` followed by any isolated nodes (seeds the graph has
    no edge for): such a node's row of ``P`` is empty, so its share is its teleport weight.
    Returns the scores and whether this call had to factorise."""
    p = np.asarray(teleport, dtype=np.float64)
    total = p.sum()
    if total <= 0:
        return np.zeros_like(p), False
    n = len(graph.ids)
    y = p / total
    made = False
    if n:
        lu, made = graph.factor(damping)
        y = np.concatenate([lu.solve(y[:n]), y[n:]])
    return y / y.sum(), made


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a @ b`` of two vectors on this thread (numpy's own loop, no BLAS).

    Why: OpenBLAS splits a dot product of more than 10,000 elements over its threads, and
    its worker then spins on the other core for a while after each call. CG makes three such
    products per pass on route 2's graph (22k nodes on MuSiQue), so the question's embedding
    that follows (route2_skeleton's anchors) ran on a core the spinning worker held: 19.78 ms
    p50 right after a solve with BLAS dots against 16.15 with these, 15.09-15.33 alone
    (``/tmp/exp/cgdot.py``, 30 questions x 4 alternated). The solve itself takes the same
    time either way; the products agree to the last bits (L1 difference ~2e-16)."""
    return float(np.einsum("i,i->", a, b))


def cg_pagerank(
    graph: TypedGraph, teleport: np.ndarray, *, damping: float = DEFAULT_DAMPING, tol: float = 1e-10, max_iter: int = 200
) -> PPRResult:
    """The same fixed point as :func:`direct_pagerank`, by conjugate gradients, for graphs
    whose LU factors fill in (route 2's similarity and section edges).

    ``A`` is symmetric, so with ``x = D^1/2 y`` the system ``(I - d P) x = p`` becomes
    ``(I - d S) y = D^-1/2 p`` with ``S = D^-1/2 A D^-1/2`` (:attr:`TypedGraph.symmetric`):
    symmetric positive definite with eigenvalues in ``[1 - d, 1 + d]``, so CG needs about
    half the mat-vecs of the power iteration (31-38 against 71-77 at d = 0.85 on the graphs
    measured), whatever the graph's size, and makes no factors.

    It stops on a certified error instead of a step size: the residual ``rho`` gives
    ``x - x_k = (I - d P)^-1 D^1/2 rho``, and ``I - d P`` has a column-stochastic ``P``, so
    the L1 norm of its inverse is ``1 / (1 - d)``; the normalised scores are then off by at
    most ``2 |D^1/2 rho|_1 / (1 - d)`` in L1. Stopping when that bound is below ``tol`` is
    stricter than :func:`personalized_pagerank` at the same ``tol`` (its step size bounds its
    error only to within ``d / (1 - d)`` times).

    ``teleport`` covers ``graph.ids`` followed by any isolated nodes, as in
    :func:`direct_pagerank`."""
    p = np.asarray(teleport, dtype=np.float64)
    total = p.sum()
    if total <= 0:
        return PPRResult(np.zeros_like(p), 0, True)
    p = p / total
    n = len(graph.ids)
    x = p.copy()  # isolated nodes (in the graph or appended) keep their teleport weight
    if not n:
        return PPRResult(x, 0, True)
    form = graph.symmetric
    y = np.zeros(n)
    residual = p[:n] * form.inv_root
    direction = residual.copy()
    rr = _dot(residual, residual)
    bound_scale = 2.0 / (1.0 - damping)
    iterations = 0
    converged = bound_scale * _dot(np.abs(residual), form.root) <= tol
    while not converged and iterations < max_iter:
        check_deadline("ppr")
        iterations += 1
        product = form.times(direction)
        product *= -damping
        product += direction  # (I - d S) direction
        alpha = rr / _dot(direction, product)
        y += alpha * direction
        residual -= alpha * product
        rr_next = _dot(residual, residual)
        direction *= rr_next / rr
        direction += residual
        rr = rr_next
        converged = bound_scale * _dot(np.abs(residual), form.root) <= tol
    connected = form.root > 0
    x[:n][connected] = form.root[connected] * y[connected]
    return PPRResult(x / x.sum(), iterations, converged)


TIE_DIGITS = 12


def settle_ties(scores: np.ndarray) -> np.ndarray:
    """Scores rounded to ``TIE_DIGITS`` significant digits of the largest, so nodes the graph
    cannot tell apart (same neighbours, same weights) tie exactly and rank by id.

    Without it, which of two symmetric entities enters the top k depends on rounding in the
    last bits, which differs between solvers (and between the same solver's operation
    orders); both solvers agree far below this (L1 ~4e-10 on MuSiQue)."""
    top = float(scores.max()) if len(scores) else 0.0
    if top <= 0:
        return scores
    return np.round(scores / top, TIE_DIGITS) * top


class NodeMass(Mapping[str, float]):
    """PPR mass of the non-entity nodes (chunks, sections) of one PPR pass, as a read-only
    mapping over the score array: a dict of every node with mass cost milliseconds per question
    and grew with the graph, while its readers look at a dozen chunks."""

    def __init__(
        self, ids: Sequence[str], index: Mapping[str, int], scores: np.ndarray, is_chunk: np.ndarray | None = None
    ) -> None:
        self._ids = ids
        self._index = index
        self._scores = scores  # zero for entities and for nodes the walk never reached
        self.is_chunk = is_chunk  # bool per node when the solver knows which are TextChunks

    def __getitem__(self, key: str) -> float:
        i = self._index.get(key)
        if i is None or self._scores[i] <= 0:
            raise KeyError(key)
        return float(self._scores[i])

    def __iter__(self) -> Iterator[str]:
        return (self._ids[int(i)] for i in np.flatnonzero(self._scores > 0))

    def __len__(self) -> int:
        return int(np.count_nonzero(self._scores > 0))

    def top(self, k: int, among: frozenset[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` nodes of ``among`` (None: the TextChunks, ``is_chunk``) with the most
        mass, ties broken by id."""
        s = self._scores
        positive = np.flatnonzero(s > 0)
        if among is None:
            if self.is_chunk is None:
                raise ValueError("NodeMass.top without `among` needs the chunk mask")
            cand = largest(s, positive[self.is_chunk[positive]], k)
            return sorted(((self._ids[int(i)], float(s[i])) for i in cand), key=lambda cm: (-cm[1], cm[0]))[:k]
        want = 4 * k
        while True:
            cand = largest(s, positive, want)
            found = [(self._ids[int(i)], float(s[i])) for i in cand if self._ids[int(i)] in among]
            # every member outside ``cand`` has less mass than all of ``cand``: k found are the top k
            if len(found) >= k or len(cand) == len(positive):
                break
            want *= 4
        ranked = sorted(found, key=lambda cm: (-cm[1], cm[0]))
        return ranked[:k]


def top_positive(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` largest positive ``scores``, ties broken by index (node ids are
    sorted, so by id).

    Why not one stable argsort: it orders all 22k nodes of MuSiQue's graph to keep 15
    (1.41 ms against 0.24 for this partition, median of 200 on 22,225 scores)."""
    return [int(i) for i in ranked_top(scores, np.flatnonzero(scores > 0), k)]


def budget_cut(scores: Sequence[float], budget: float) -> int:
    """How many of the (descending) ``scores`` to keep: entities are kept in order until
    their cumulative share of the total mass reaches ``budget`` (the entity that crosses it
    is kept). ``budget = 1`` keeps all."""
    total = float(sum(scores))
    if total <= 0 or budget >= 1.0:
        return len(scores)
    acc = 0.0
    for i, s in enumerate(scores):
        acc += s
        if acc / total >= budget - 1e-12:
            return i + 1
    return len(scores)


class PPR(Stage):
    """Personalized PageRank from weighted seeds over five typed edge paths; ranks entities."""

    name = "ppr"
    kind = StageKind.EXPANDER
    consumes = (Slot.SEEDS,)
    reads = (Slot.DAMPING,)
    produces = (Slot.ENTITIES, Slot.NODE_SCORES)
    slot_params = {"damping": Slot.DAMPING}

    class Params(StageParams):
        damping: float | None = Field(
            None, gt=0.0, lt=1.0,
            description="Probability of following an edge (1 - teleport). null: the damping an earlier "
            "stage chose for the question (weight_profile, unified_seeds), else 0.85. A number here is "
            "refused when an earlier stage chooses it, so one of the two is never silently ignored.",
        )
        top_k: int = Field(15, ge=1, le=10_000, description="Entities ranked before the relevance budget.")
        budget: float = Field(
            0.8, gt=0.0, le=1.0,
            description="Relevance budget: keep top entities until their cumulative share of the top_k "
            "PPR mass reaches this fraction (1.0 keeps all top_k).",
        )
        weight_entity: float = Field(1.0, ge=0.0, le=100.0, description="Path 1: RELATION / CO_OCCURS entity edges.")
        weight_section: float = Field(1.0, ge=0.0, le=100.0, description="Path 2: SEMANTICALLY_SIMILAR section edges.")
        weight_similar: float = Field(1.0, ge=0.0, le=100.0, description="Path 3: SEMANTICALLY_SIMILAR entity kNN edges.")
        weight_shares: float = Field(1.0, ge=0.0, le=100.0, description="Path 4: SHARES_ENTITY cross-document section edges.")
        weight_hub: float = Field(1.0, ge=0.0, le=100.0, description="Path 5: HAS_HUB_ENTITY section -> hub entity edges.")
        weight_mentions: float = Field(
            1.0, ge=0.0, le=100.0,
            description="Connector of paths 2, 4, 5: chunk MENTIONS and IN_SECTION edges (the reference's APPEARS_IN_SECTION).",
        )
        weight_title: float = Field(
            0.0, ge=0.0, le=100.0,
            description="Entity <-> the chunks of the document whose title names it (its own page: 'Iowa' for "
            "the entity Iowa; the OWN_PAGE edges the entity_graph index step writes), beside the MENTIONS every "
            "other chunk gets; 0: off (the reference's graph).",
        )
        solver: Literal["power", "direct", "cg", "push"] = Field(
            "power",
            description="power: the power iteration, stopped by tol / max_iter; ~75 passes over the graph "
            "per question. cg: conjugate gradients on the symmetric form of the same system, stopped when "
            "its certified L1 error is below tol; ~30-40 passes, no set-up beyond one scaled copy of the "
            "graph. direct: one sparse LU solve per question, the factors made once per graph and damping "
            "- ~13x faster than power where they stay sparse (an entity graph without kNN similarity "
            "edges), but similarity and section edges can make them dense (MuSiQue, every path on: 65 M "
            "non-zeros, 112 s). All three give the same ranking. push: local forward push "
            "(Andersen-Chung-Lang) that reads only the neighbourhoods the walk reaches from the store, a "
            "frontier at a time, and holds nothing corpus-sized; approximate within push_eps.",
        )
        push_above: int | None = Field(
            None, ge=0, le=1_000_000_000,
            description="With an exact solver (power, cg, direct): a group holding more entities than this "
            "runs the push instead (with push_eps and push_tolerance), so the client never exports the "
            "typed graph of a larger group (the trace's solver and push_above_entities say which ran); "
            "null: the exact solver whatever the size.",
        )
        push_eps: float = Field(
            DEFAULT_PUSH_EPS, gt=0.0, le=1e-2,
            description="solver push: residual per unit of degree left unpushed (where it starts, with "
            "push_tolerance). Each score is within eps x damping / (1 - damping) x the node's degree of the "
            "exact one (the trace's error_bound); smaller is closer and reads more of the graph.",
        )
        push_tolerance: float | None = Field(
            0.05, gt=0.0, le=10.0,
            description="solver push: lower eps (a third at a time, down to 1e-7) until the certified L1 error "
            "bound (no score is off by more than it) is at most this share of the smallest score ranked (the "
            "top_k-th entity's or chunk's); null: stop at push_eps.",
        )
        push_engine: Literal["auto", "client"] = Field(
            "auto",
            description="solver push: auto runs the push inside the database where the store can (Neo4j with "
            "graphroute's procedures installed: one call a question, docs/pages/scaling.md), else from the "
            "client; client: always from the client, a store read per frontier. A push_tolerance is always "
            "certified from the client.",
        )
        push_remainder: Literal["degree", "none"] = Field(
            "degree",
            description="solver push without push_tolerance: degree adds to the 100 best entities' and chunks' "
            "scores their degree's share of the mass the push left unpushed (l1_error_bound), where that mass's "
            "walks end once mixed over the graph (docs/pages/scaling.md, Equivalence); none ranks by the push's "
            "own estimate, below the exact scores.",
        )
        tol: float = Field(
            1e-10, gt=0.0, le=1e-2,
            description="solver power: L1 change that stops the iteration; solver cg: bound on the L1 error that stops it.",
        )
        max_iter: int = Field(200, ge=1, le=10_000, description="solvers power and cg: upper bound on iterations.")

    params: Params

    def weights(self) -> PathWeights:
        p = self.params
        return PathWeights(
            p.weight_entity, p.weight_section, p.weight_similar, p.weight_shares, p.weight_hub, p.weight_mentions, p.weight_title
        )

    def run(self, state: QueryState, ctx: StageContext) -> None:
        import scipy.sparse as sp
        p = self.params
        damping = p.damping if p.damping is not None else (state.damping or DEFAULT_DAMPING)
        store = ctx.services.store
        seed_ids, seed_weights = teleport_seeds(state)
        ctx.stats.update({"seeds": len(seed_ids), "damping": round(damping, 4)})
        if not seed_ids:
            state.entities = []
            ctx.stats.update({"converged": True, "entities_ranked": 0, "reason": "no resolved seeds"})
            return
        solver = p.solver
        if solver != "push" and p.push_above is not None:
            entities = counted_nodes(store, state.group, Label.ENTITY)
            if entities > p.push_above:
                solver = "push"
                ctx.stats["push_above_entities"] = entities
        if solver == "push":
            from .local_ppr import run_push

            run_push(self, state, ctx, seed_ids, seed_weights, damping)
            return
        g = typed_graph(store, state.group, self.weights())
        # seeds absent from the graph (entities without any edge) still rank: add them as
        # isolated nodes, which teleport all their mass back to the seeds. One lookup pass
        # (C-level ``map``) finds both the rows and the absent seeds: Route 5 has ~1,100 seeds.
        rows = np.fromiter(map(g.index.get, seed_ids, repeat(-1)), dtype=np.int64, count=len(seed_ids))
        absent = np.flatnonzero(rows < 0)
        extra = sorted({seed_ids[k] for k in absent.tolist()})
        n = len(g.ids) + len(extra)
        is_ent = g.is_entity
        ids: Sequence[str] = g.ids
        pos: Mapping[str, int] = g.index
        if extra:
            is_ent = np.concatenate([is_ent, np.fromiter((is_entity_id(x) for x in extra), dtype=bool, count=len(extra))])
            ids = (*g.ids, *extra)
            added = {x: len(g.ids) + k for k, x in enumerate(extra)}
            pos = {**g.index, **added}
            rows[absent] = [added[seed_ids[k]] for k in absent.tolist()]
        # one vectorised scatter-add, in seed order, so the sums are a per-seed loop's to the bit
        teleport = np.zeros(n, dtype=np.float64)
        np.add.at(teleport, rows, seed_weights)
        if p.solver == "direct":
            raw, factorised = direct_pagerank(g, teleport, damping=damping)
            ctx.stats.update({"solver": "direct", "factorised": factorised, "converged": True})
        elif p.solver == "cg":
            res = cg_pagerank(g, teleport, damping=damping, tol=p.tol, max_iter=p.max_iter)
            raw = res.scores
            ctx.stats.update({"solver": "cg", "iterations": res.iterations, "converged": res.converged})
        else:
            trans, dangling = g.transition, g.dangling
            if extra:
                trans = sp.block_diag((trans, sp.csr_matrix((len(extra), len(extra)))), format="csr")
                dangling = np.concatenate([dangling, np.ones(len(extra), dtype=bool)])
            res = personalized_pagerank(trans, teleport, damping=damping, dangling=dangling, tol=p.tol, max_iter=p.max_iter)
            raw = res.scores
            ctx.stats.update({"solver": "power", "iterations": res.iterations, "converged": res.converged})
        mass = settle_ties(raw)
        scores = np.where(is_ent, mass, 0.0)
        top = top_positive(scores, p.top_k)
        keep = budget_cut([float(scores[i]) for i in top], p.budget)
        chosen = top[:keep]
        nodes = {nd.id: nd for nd in store.get_nodes(state.group, [ids[i] for i in chosen])}
        state.entities = [_scored(ids[i], float(scores[i]), nodes.get(ids[i])) for i in chosen]
        # chunk PPR mass: ppr_passages' ranking and an optional ordering signal for entity_chunks
        chunk_mask = g.is_chunk if g.is_chunk is not None else np.zeros(len(g.ids), dtype=bool)
        if extra:
            chunk_mask = np.concatenate([chunk_mask, np.zeros(len(extra), dtype=bool)])
        state.node_scores = NodeMass(ids, pos, np.where(is_ent, 0.0, mass), chunk_mask)
        ctx.stats.update(
            {
                "graph_nodes": n,
                "graph_edges": g.edges,
                "seeds_in_graph": int((rows < len(g.ids)).sum()),
                "entities_ranked": len(top),
                "entities_kept": len(chosen),
                "budget_mass": round(sum(float(scores[i]) for i in chosen) / max(sum(float(scores[i]) for i in top), 1e-300), 4),
                "top": [{"entity": e.name or e.id, "score": round(e.score, 6)} for e in state.entities[:5]],
            }
        )


def teleport_seeds(state: QueryState) -> tuple[list[str], np.ndarray]:
    """The node ids and weights of the state's positive seeds, records then arrays: what
    the teleport vector is made of. Route 5 hands over ~1,000 of them in a SeedArray."""
    records = [s for s in state.seeds if s.node_id and s.weight > 0]
    ids = [s.node_id or "" for s in records]
    weights = [np.fromiter((s.weight for s in records), dtype=np.float64, count=len(records))]
    for a in state.seed_arrays:
        seeding = a.positive()
        ids += seeding.node_ids
        weights.append(seeding.weights)
    return ids, np.concatenate(weights)


def _scored(node_id: str, score: float, node: Node | None) -> ScoredNode:
    props = node.props if node is not None else {}
    community = props.get("community")
    return ScoredNode(
        id=node_id,
        name=str(props.get("name") or node_id.removeprefix("ent:")),
        score=score,
        community=int(community) if isinstance(community, int | float) and not isinstance(community, bool) else None,
    )


# --------------------------------------------------------------------------- entity -> chunks


def chunk_evidence(node: Node, score: float, *, source: str, entity: str | None = None) -> Evidence:
    """An Evidence record for a TextChunk node (document title, section path filled)."""
    props = node.props
    layout = layout_of(props)
    return Evidence(
        id=node.id,
        text=str(props.get("text", "")),
        score=score,
        kind="chunk",
        document=str(props.get("title") or props.get("document") or ""),
        document_id=node.doc_id or str(props.get("doc_id") or ""),
        section_path=str(props.get("section_path") or ""),
        source=source,
        page=props.get("page") if isinstance(props.get("page"), int) else None,
        boxes=boxes_in(layout),
        chunk_id=node.id,
        entity=entity,
        metadata={"layout": layout} if layout else {},
    )


class EntityChunks(Stage):
    """Entity -> MENTIONS <- TextChunk: each ranked entity brings its chunks, scored by the entity."""

    name = "entity_chunks"
    kind = StageKind.EXPANDER
    consumes = (Slot.ENTITIES,)
    reads = (Slot.NODE_SCORES,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        limit_per_entity: int = Field(12, ge=1, le=1000, description="Chunks fetched per entity.")
        order: Literal["chunk_order", "ppr"] = Field(
            "chunk_order",
            description="Which of an entity's chunks come first (and survive the limit): reading order "
            "(reference) or the chunks' own PPR mass when the ppr stage recorded it.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        store = ctx.services.store
        mass: Mapping[str, float] = state.node_scores if self.params.order == "ppr" else {}
        # each entity's chunks read from the store, a bounded slice per entity (mentions.py)
        kept, nodes = chunks_in_order(store, state.group, [e.id for e in state.entities], self.params.limit_per_entity, mass)
        added = 0
        for ent in state.entities:
            for cid in kept.get(ent.id, []):
                if cid not in nodes:
                    continue
                ev = chunk_evidence(nodes[cid], ent.score, source="ppr", entity=ent.id)
                ev.metadata["entity_name"] = ent.name
                state.evidence.append(ev)
                added += 1
        ctx.stats.update(
            {"entities": len(state.entities), "raw_chunks": added, "distinct_chunks": len({e.id for e in state.evidence})}
        )


class PPRPassages(Stage):
    """Rank TextChunks by their own mass in the PPR pass (HippoRAG's passage score) -> evidence."""

    name = "ppr_passages"
    kind = StageKind.EXPANDER
    consumes = (Slot.NODE_SCORES,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        top_k: int = Field(12, ge=1, le=1000, description="Chunks with the most PPR mass that become evidence.")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        # HippoRAG (1 and 2) scores a passage by the PPR probability on its own node rather
        # than by the entity that led to it; chunks are PPR nodes here through MENTIONS, so
        # the ppr stage's node scores already hold that ranking.
        store = ctx.services.store
        mass: Mapping[str, float] = state.node_scores
        if isinstance(mass, NodeMass) and mass.is_chunk is not None:
            top = mass.top(self.params.top_k)  # the solver knows its chunks: no list of the group's
        elif isinstance(mass, NodeMass):
            top = mass.top(self.params.top_k, node_ids(store, state.group, Label.CHUNK))
        else:  # a plain mapping set by another stage
            chunks = node_ids(store, state.group, Label.CHUNK)
            ranked = sorted(((c, m) for c, m in mass.items() if c in chunks and m > 0), key=lambda cm: (-cm[1], cm[0]))
            top = ranked[: self.params.top_k]
        nodes = {n.id: n for n in store.get_nodes(state.group, [c for c, _ in top])}
        seen = {e.id for e in state.evidence}
        added = 0
        for c, m in top:
            if c in nodes and c not in seen:
                # source "ppr" like entity_chunks: the evidence comes from the PPR branch
                ev = chunk_evidence(nodes[c], m, source="ppr")
                ev.metadata["ranking"] = "ppr_mass"
                state.evidence.append(ev)
                added += 1
        ctx.stats.update({"chunks_considered": len(top), "added": added})


@hookimpl
def register_expanders() -> list[type[Stage]]:
    return [PPR, EntityChunks, PPRPassages]
