"""The store protocol: the one interface every backend implements.

Both built-in backends (``embedded`` and ``neo4j``) pass the same conformance suite
(tests/conformance). Rules every backend keeps:

* **Group isolation** - every call names a group; nothing crosses groups, ever.
* **Atomic writes** - one :meth:`GraphStore.write` call is all-or-nothing, so an interrupted
  index run leaves the previous state readable.
* **Versioned** - :meth:`GraphStore.version` changes on every write to a group, so caches
  (graph export, adjacency) invalidate themselves.
* **Values, never code** - titles, names and group ids are passed as parameters, never
  spliced into a query language.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
from graphroute.core.api.models import Edge, Label, Node
from graphroute.core.api.neighbourhood import (
    NeighbourCounts,
    Neighbourhood,
    PushedScores,
    TypeDegrees,
    counts_of,
    neighbourhood_of,
)
from graphroute.core.errors import StoreError

Direction = Literal["out", "in", "both"]
VectorBatch = Mapping[str, tuple[Sequence[str], np.ndarray]]


class DocumentBatch(NamedTuple):
    """The nodes, edges and vectors of some documents: the unit
    :meth:`GraphStore.write_batches` writes atomically (a one-writer store writes a whole
    call's batches in one transaction)."""

    nodes: Sequence[Node]
    edges: Sequence[Edge]
    vectors: VectorBatch | None = None


class TextMatch(NamedTuple):
    """One :meth:`GraphStore.match_text` look-up, for :meth:`GraphStore.match_texts`."""

    clauses: tuple[tuple[str, ...], ...]
    limit: int
    fuzzy: bool = False
    near: tuple[str, ...] = ()


T = TypeVar("T")


def dump_props(props: Mapping[str, Any]) -> str | None:
    """Properties as compact JSON (None when empty): how both backends persist them."""
    return json.dumps(props, ensure_ascii=False, separators=(",", ":")) if props else None


def load_props(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def batched(rows: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` rows (write batches, IN-list chunks)."""
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


_tokens = itertools.count(1)
_token_lock = threading.Lock()


def cache_token(store: object) -> int:
    """A number that identifies one store object for as long as the process runs. Caches of
    derived structures key on it rather than ``id(store)``: a closed store's id is reused by
    the next object, and a fresh store at the same group version would then be served the
    old store's graph."""
    token = getattr(store, "_graphroute_cache_token", None)
    if token is None:
        with _token_lock:
            token = getattr(store, "_graphroute_cache_token", None)
            if token is None:
                token = next(_tokens)
                store._graphroute_cache_token = token  # type: ignore[attr-defined]
    return int(token)


_derived: dict[tuple[int, str, Hashable], tuple[int, Any]] = {}
_derived_lock = threading.Lock()
_DERIVED_MAX = 256


# The versions one question has read, per (store token, group): set by the query runner.
_question_versions: ContextVar[dict[tuple[int, str], int] | None] = ContextVar("graphroute_question_versions", default=None)


@contextmanager
def one_version_per_question() -> Iterator[None]:
    """Within the block, :func:`read_version` reads each group's version from its store once
    and answers later calls from that reading. The query runner wraps a question in it: a
    question's stages key their derived structures on one version (a write during the
    question is seen by the next one), and a remote store (Neo4j) gets one version read per
    question instead of one per stage."""
    token = _question_versions.set({})
    try:
        yield
    finally:
        _question_versions.reset(token)


def read_version(store: GraphStore, group: str) -> int:
    """``store.version(group)``, read once per question inside :func:`one_version_per_question`."""
    held = _question_versions.get()
    if held is None:
        return store.version(group)
    slot = (cache_token(store), group)
    version = held.get(slot)
    if version is None:
        version = held[slot] = store.version(group)
    return version


def per_version(store: GraphStore, group: str, key: Hashable, build: Callable[[], T]) -> T:
    """A read-only structure derived from a group (a lexicon, a title index, a community
    profile), built by ``build`` once per store version and shared until the next write bumps
    the version. Query stages use it for what would otherwise read every node per question.
    The version is read before building, so a write during the build is never cached as
    current (within a question, the version the question read first: :func:`read_version`).
    At most ``_DERIVED_MAX`` entries; the cache is cleared whole when full."""
    version = read_version(store, group)
    slot = (cache_token(store), group, key)
    with _derived_lock:
        hit = _derived.get(slot)
    if hit is not None and hit[0] == version:
        return hit[1]  # type: ignore[no-any-return]
    value = build()
    with _derived_lock:
        if len(_derived) >= _DERIVED_MAX:
            _derived.clear()
        _derived[slot] = (version, value)
    return value


def counted_nodes(store: GraphStore, group: str, label: str) -> int:
    """:meth:`GraphStore.count_nodes`, counted once per store version."""
    return per_version(store, group, ("count_nodes", str(label)), lambda: store.count_nodes(group, label))


def clear_derived() -> None:
    """Forget every structure :func:`per_version` holds (benchmarks time cold builds)."""
    with _derived_lock:
        _derived.clear()


def checked_vectors(space: str, ids: Sequence[str], matrix: Any) -> np.ndarray:
    """``matrix`` as float32 rows, one per id and all finite, or a StoreError before anything
    is written: every backend's write and :func:`merge_batches` check vectors this way."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape[0] != len(ids):
        raise StoreError(f"vectors for space {space!r}: {len(ids)} ids but matrix shape {m.shape}")
    if len(ids) and not np.all(np.isfinite(m)):
        raise StoreError(f"vectors for space {space!r} contain NaN or infinity")
    return m


def merge_batches(batches: Sequence[DocumentBatch]) -> DocumentBatch:
    """One batch holding the nodes, edges and vectors of several batches of disjoint
    documents, for one transaction. Each batch's vectors are checked against their ids
    first: concatenated, one batch's missing row and another's extra one would pair every
    later vector with the wrong id."""
    nodes: list[Node] = []
    edges: list[Edge] = []
    vectors: dict[str, tuple[list[str], list[np.ndarray]]] = {}
    for b in batches:
        nodes.extend(b.nodes)
        edges.extend(b.edges)
        for space, (ids, matrix) in (b.vectors or {}).items():
            acc = vectors.setdefault(str(space), ([], []))
            acc[0].extend(ids)
            acc[1].append(checked_vectors(space, ids, matrix))
    return DocumentBatch(nodes, edges, {space: (ids, np.concatenate(ms)) for space, (ids, ms) in vectors.items()})


class MetaPatch(dict[str, Any]):
    """A ``meta`` value for :meth:`GraphStore.write` that updates the stored mapping entry
    by entry (``None`` removes an entry) instead of replacing it. The store reads, merges and
    writes it in the write's own transaction, so concurrent writers of different entries
    (two index runs into one group, each adding its documents) keep each other's."""


def patched_meta(current: Any, patch: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` (a mapping, or nothing yet) with ``patch`` applied (see :class:`MetaPatch`)."""
    out = dict(current) if isinstance(current, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def is_scalar(value: Any) -> bool:
    """A property value a database can index and compare itself (text, number, boolean)."""
    return isinstance(value, str | int | float | bool)


def nodes_equal_to(nodes: Iterable[Node], prop: str, values: Collection[Any]) -> list[Node]:
    """The ``nodes`` whose property ``prop`` equals one of ``values``, by Python equality
    (``1 == 1.0 == True``, lists and dicts by value), one per id, ordered by id.

    Every backend's :meth:`GraphStore.find_nodes` ends here: its query narrows the rows by
    what the database can compare (an index on scalar values, or the whole label), and this
    decides, so both backends answer the same for values their query languages compare
    differently (SQLite's ``json_extract`` would also match a list's JSON text)."""
    hashable = {v for v in values if is_scalar(v)}
    others = [v for v in values if not is_scalar(v)]
    out: dict[str, Node] = {}
    for node in nodes:
        if prop not in node.props:
            continue
        value = node.props[prop]
        if (is_scalar(value) and value in hashable) or any(value == o for o in others):
            out[node.id] = node
    return sorted(out.values(), key=lambda n: n.id)


def document_titles(store: GraphStore, group: str) -> dict[str, str]:
    """Document id -> title ("" when it has none), for every Document of the group: what a
    chunk's text is read with by BM25, the negative-detection lexicon and the entity graph."""
    return {n.id: str(n.props.get("title") or "") for n in store.iter_nodes(group, Label.DOCUMENT)}


# HOST:PORT alone (127.0.0.1:7687, [::1]:7687): a server's address with its scheme left out,
# which a backend taking local paths must not read as a new folder's name
_SERVER_ADDRESS_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.\-]*):\d{1,5}/?$")


def looks_like_server_address(location: str) -> bool:
    """True when ``location`` is ``HOST:PORT`` and nothing else: a store URI whose scheme
    was left out (``127.0.0.1:7687`` for ``bolt://127.0.0.1:7687``)."""
    return _SERVER_ADDRESS_RE.match(location) is not None


def title_key(title: Any) -> str:
    """How a listing compares document titles: case-insensitively (``str.casefold``), a
    missing title as "". :meth:`GraphStore.document_page` orders by it, then by id."""
    return "" if title is None else str(title).casefold()


class GraphStore(ABC):
    """Nodes, edges, properties and vectors of many isolated groups."""

    backend: str = ""
    location: str = ""
    # How many ``write`` calls of disjoint documents may run at once from different threads
    # (each still its own transaction); 1 means calls must not overlap. A server backend
    # raises it so its commit work uses more than one core (see ``write_batches``).
    write_concurrency: int = 1
    # True when this process may read the store but not write it (a read-only mount, another
    # user's files): queries work, writes raise StoreLocationError
    read_only: bool = False

    # ------------------------------------------------------------------ lifecycle
    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> None:
        """Return when the store can answer now; raise StoreUnavailableError (or StoreError)
        quickly when it cannot: health checks call it. The default reads the group list."""
        self.groups()

    def index_lock(self, group: str) -> AbstractContextManager[None]:
        """Held by an index run or a delete of ``group`` from its first read to its last
        write, so two never interleave (each builds the derived layers from what it read);
        entering it while another process or thread holds it raises GroupBusyError at once.
        Queries never take it. The default is no lock, for a backend that cannot hold one."""
        return nullcontext()

    # ------------------------------------------------------------------ groups and metadata
    @abstractmethod
    def groups(self) -> list[str]:
        """Groups that hold anything."""

    @abstractmethod
    def get_meta(self, group: str, key: str) -> Any | None:
        """A JSON value stored for the group (index profile, document hashes, ...)."""

    @abstractmethod
    def set_meta(self, group: str, key: str, value: Any) -> None: ...

    @abstractmethod
    def version(self, group: str) -> int:
        """A counter that changes on every write to the group."""

    def upgrade_group(self, group: str) -> list[str]:
        """Bring a group written by an older graphroute up to what this backend's queries
        expect (Neo4j: the full-text indexes of its sentences, entity names and section
        titles); what it did, one line a change
        (none when there was nothing to do). The indexer calls it before each run."""
        return []

    # ------------------------------------------------------------------ writes
    @abstractmethod
    def write(
        self,
        group: str,
        nodes: Sequence[Node] = (),
        edges: Sequence[Edge] = (),
        vectors: VectorBatch | None = None,
        *,
        replace_doc: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Upsert nodes (by id), add edges and set vectors (space -> (ids, matrix)) in one
        atomic transaction. With ``replace_doc``, first delete everything that document
        owns, in the same transaction; ``meta`` keys are set in it too (a :class:`MetaPatch`
        value is merged into the stored one there, not written over it)."""

    def write_batches(
        self, group: str, batches: Sequence[DocumentBatch], *, meta: Mapping[str, Any] | None = None
    ) -> None:
        """Write batches of *disjoint* new documents and then ``meta``; returns when all are
        written, or raises the first failure.

        A store that takes one write at a time (``write_concurrency`` 1, the embedded store)
        writes the whole call as one transaction, ``meta`` included: all or nothing (so does
        any store given a single batch). Why: each commit rewrites every index page its rows
        touch, and documents' content-hashed ids spread a batch over all of them; eight
        batches in one commit rewrite those pages once instead of eight times (graphroute
        perf's write part, embedded, median of 12: 8,797.7 against 7,430.7 sentences/s).
        The caller bounds a call's size: the indexer
        passes one embedding window, a few thousand texts.

        A store that keeps several in flight (``write_concurrency`` > 1) writes each batch
        atomically (one ``write_in_flight`` each), up to that many at once, and ``meta`` after the
        last has committed. Why: one writer leaves a server's second core idle while the
        first commits (Neo4j: node and index records, the vector indexes' HNSW inserts).
        Which batches committed before a failure is not defined (later ones are not started
        and ``meta`` is not written), so callers record the documents as written only
        through ``meta`` (the indexer marks them in flight first: ``core/indexing.py``).
        Each batch goes through :meth:`write_in_flight`, and a last :meth:`write` (with
        ``meta``, or empty) ends the call, so a store may bump its version once there
        instead of in every batch; readers may see the batches before that bump. The
        first batch is written alone unless the group's vector spaces already have their
        dimensions recorded (:meth:`_dims_recorded`): it may record one, which two concurrent
        first writes of a group contend for (Neo4j: ``DeadlockDetected``, retried after ~1
        s). After the group's first window the pool starts full (Neo4j, graphroute perf's
        write part in the indexer's windows: a first batch alone per window cost ~15%)."""
        if not batches:
            if meta:
                self.write(group, meta=meta)
            return
        if self.write_concurrency <= 1 or len(batches) == 1:
            merged = merge_batches(batches)
            self.write(group, merged.nodes, merged.edges, merged.vectors, meta=meta)
            return

        def put(b: DocumentBatch) -> None:
            self.write_in_flight(group, b)

        rest = batches
        if not self._dims_recorded(group, {str(space) for b in batches for space in (b.vectors or {})}):
            put(batches[0])
            rest = batches[1:]
        if len(rest) == 1:
            put(rest[0])
        else:
            with ThreadPoolExecutor(min(self.write_concurrency, len(rest)), thread_name_prefix="graphroute-write") as pool:
                futures = [pool.submit(put, b) for b in rest]
                for f in futures:
                    exc = f.exception()
                    if exc is not None:
                        for later in futures:
                            later.cancel()  # the ones not started; leaving the block waits for the rest
                        raise exc
        self.write(group, meta=meta)

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Writes of a large new corpus inside the block: a store may suspend the upkeep of
        indexes it builds faster in one pass afterwards, and build them when the block ends
        (searches that need them may fail or miss until then, in every group). The default
        suspends nothing. ``graphroute perf graph-gen`` writes its corpus inside one."""
        yield

    def write_in_flight(self, group: str, batch: DocumentBatch) -> None:
        """One batch of a concurrent :meth:`write_batches` call, atomic on its own. The
        default is a plain :meth:`write`; a store overrides it to leave per-call bookkeeping
        (the Neo4j store's version bump) to the ``write`` that ends the call."""
        self.write(group, batch.nodes, batch.edges, batch.vectors)

    def _dims_recorded(self, group: str, spaces: Collection[str]) -> bool:
        """True when every one of ``spaces`` already has the group's vector dimension
        recorded, so concurrent writes of vectors in them record nothing new (see
        :meth:`write_batches`). The default does not know and says False, the safe answer."""
        return False

    @abstractmethod
    def delete_document(self, group: str, doc_id: str) -> int:
        """Delete the nodes, edges and vectors the document owns; return nodes removed."""

    @abstractmethod
    def delete_derived(
        self,
        group: str,
        *,
        labels: Collection[str] = (),
        edge_types: Collection[str] = (),
        edge_src_label: str | None = None,
    ) -> None:
        """Delete all nodes of ``labels`` (with their edges and vectors) and all edges of
        ``edge_types`` in the group: how index steps rebuild a derived layer. With
        ``edge_src_label``, only edges whose source node has that label are deleted (entity
        and section similarity share the SEMANTICALLY_SIMILAR type)."""

    @abstractmethod
    def delete_group(self, group: str) -> None: ...

    # ------------------------------------------------------------------ reads
    @abstractmethod
    def get_nodes(self, group: str, ids: Sequence[str]) -> list[Node]:
        """Nodes by id, in the order asked; unknown ids are skipped."""

    @abstractmethod
    def iter_nodes(
        self, group: str, label: str | None = None, *, doc_id: str | None = None
    ) -> Iterator[Node]:
        """Every node of the group (of ``label``, of ``doc_id``), ordered by id.

        A whole-group scan: it may hand rows over a batch at a time, so a large group is
        never held at once, but it shows the group as it was when the call was made (a write
        that commits meanwhile does not appear), and a scan left half-read must not block
        or stale later reads and writes of the calling thread. The conformance suite's
        ``test_a_scan_*`` tests pin both."""

    @abstractmethod
    def find_nodes(self, group: str, label: str, prop: str, values: Collection[Any]) -> list[Node]:
        """Nodes of ``label`` whose property ``prop`` equals one of ``values``."""

    @abstractmethod
    def edges_of(
        self,
        group: str,
        ids: Collection[str],
        types: Collection[str] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        """Edges touching ``ids`` (as source for "out", target for "in")."""

    def neighbours(
        self,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        *,
        other_labels: Collection[str] | None = None,
        first_docs: int | None = None,
        far_types: Collection[str] | None = None,
    ) -> Neighbourhood:
        """The edges of ``types`` around ``ids``, either direction, with the label and
        document of each edge's other end (of ``other_labels`` only, when given): what a
        walk over the graph reads a frontier at a time instead of exporting the group.

        With ``first_docs``, each asked node keeps only the rows whose other end belongs to
        one of its first ``first_docs`` documents (by ``doc_id``; ends without a document
        are dropped): a bounded, deterministic slice of a hub's neighbourhood.

        With ``far_types``, a backend that keeps degrees per node and type (see
        :meth:`type_degrees`) also returns the other ends' degrees of those types in the
        result's ``far``, read in the same pass; the others leave ``far`` None.

        The default reads :meth:`edges_of` and :meth:`get_nodes`; a backend answers it with
        one indexed query per batch of ids."""
        id_list = list(dict.fromkeys(ids))
        if not id_list or not types:
            return Neighbourhood({n.id: str(n.label) for n in self.get_nodes(group, id_list)})
        edges = self.edges_of(group, id_list, types, "both")
        ends = {x for e in edges for x in (e.src, e.dst)} | set(id_list)
        nodes = {n.id: n for n in self.get_nodes(group, sorted(ends))}
        labels = {i: str(nodes[i].label) for i in id_list if i in nodes}
        return neighbourhood_of(id_list, labels, edges, nodes, other_labels, first_docs)

    @abstractmethod
    def iter_edges(self, group: str, types: Collection[str] | None = None) -> Iterator[Edge]:
        """Every edge of the group (of ``types``): a whole-group scan, with the same
        guarantees as :meth:`iter_nodes`."""

    @abstractmethod
    def vector_search(
        self,
        group: str,
        space: str,
        vector: np.ndarray,
        k: int,
        *,
        restrict_to: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (id, cosine) in the group's space, best first and equal scores by id (so a
        tie at the k-th place does not depend on write order); exactly k when the space
        holds at least k vectors, however large other groups are."""

    @abstractmethod
    def get_vectors(self, group: str, space: str, ids: Sequence[str]) -> np.ndarray:
        """Vectors for ids, in order (rows of zeros for unknown ids)."""

    @abstractmethod
    def all_vectors(self, group: str, space: str) -> tuple[list[str], np.ndarray]:
        """Every (id, vector) of a space: input of kNN edge builders."""

    def neighbour_counts(
        self,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        *,
        other_labels: Collection[str] | None = None,
        limit: int | None = None,
    ) -> NeighbourCounts:
        """:meth:`neighbours`' rows counted per (node, edge type, other end's label): a
        node's degree without its edges (a hub's thousands of rows stay in the database).
        ``limit``: a backend may stop counting a node's rows at ``limit`` (so a hub costs no
        more than that); such a node is in the result's ``capped``, its counts a lower
        bound. The default counts :meth:`neighbours` whole; a backend counts in its query."""
        return counts_of(self.neighbours(group, ids, types, other_labels=other_labels))

    def type_degrees(self, group: str, ids: Sequence[str], types: Collection[str]) -> TypeDegrees | None:
        """Each asked node's number of edges of each of ``types``, in either direction and
        whatever the other end, read from degrees the backend keeps per node and type
        (Neo4j does), not by reading the edges: a hub costs what a leaf costs. One row per
        asked id that is a node of the group, with its label. None when the backend keeps
        no such degrees (the default): a caller counts with :meth:`neighbour_counts`."""
        return None

    def type_totals(self, group: str, types: Collection[str], labels: Collection[str]) -> TypeDegrees | None:
        """:meth:`type_degrees` summed over the group's nodes of each of ``labels``: one row
        per label that has nodes (its ``ids`` and ``labels`` both the label), each type's
        edge ends at that label's nodes, whatever the other end: the size of the group's
        graph per edge type, which a local walk needs and cannot see (the push spreads what
        it leaves unpushed over it in proportion to degree). Counted in the backend without reading edges
        where it keeps degrees; a caller keeps it per store version. None when the backend
        cannot count it (the default)."""
        return None

    def search_text(self, group: str, query: str, k: int, *, label: str = Label.CHUNK) -> list[tuple[str, float]] | None:
        """The group's nodes of ``label`` (TextChunks, or Sentences) best matching ``query``
        by the backend's full-text index (BM25 as it scores it), at most ``k``, best first;
        None when the backend keeps no text index of that label for the group (the embedded
        store), and a caller ranks in the client."""
        return None

    def match_text(
        self,
        group: str,
        clauses: Sequence[Sequence[str]],
        limit: int,
        *,
        fuzzy: bool = False,
        near: Sequence[str] = (),
        label: str = Label.CHUNK,
    ) -> list[str] | None:
        """The indexed texts (document title, a line break, the text) of at most ``limit`` of
        the group's nodes of ``label`` whose full-text index entry matches every clause (any
        one word of a clause), best first; ``near``: words whose standing close together
        ranks a text first. ``fuzzy``: a word also matches terms an edit or two away. The
        index analyses words its own way (a stemmer; accents kept), so these are candidates
        a caller checks with its own word rules. None when the backend keeps no full-text
        index of the label (the embedded store: a caller reads the group itself)."""
        return None

    def count_text(self, group: str, word: str, *, label: str = Label.CHUNK) -> int | None:
        """How many of the group's nodes of ``label`` the full-text index matches with
        ``word`` (as the index analyses it: a document frequency); None without such an index."""
        return None

    def match_texts(
        self, group: str, lookups: Sequence[TextMatch], *, label: str = Label.CHUNK
    ) -> list[list[str]] | None:
        """:meth:`match_text` for each of ``lookups``, in order: one round trip where the
        backend can make it one (Neo4j: one statement). None without a full-text index."""
        out: list[list[str]] = []
        for m in lookups:
            texts = self.match_text(group, m.clauses, m.limit, fuzzy=m.fuzzy, near=m.near, label=label)
            if texts is None:
                return None
            out.append(texts)
        return out

    def count_texts(self, group: str, words: Sequence[str], *, label: str = Label.CHUNK) -> list[int] | None:
        """:meth:`count_text` for each of ``words``, in order, in one round trip where the
        backend can. None without a full-text index."""
        out: list[int] = []
        for w in words:
            n = self.count_text(group, w, label=label)
            if n is None:
                return None
            out.append(n)
        return out

    def entity_candidates(self, group: str, name: str, *, fuzzy: int = 0, outer: int = 0) -> list[Node] | None:
        """The group's Entity nodes that a name may resolve to, read through the backend's
        index of entity names, in id order: those whose display name is ``name``, whose
        normalised name (or id) is a whole-word run of the normalised ``name``, whose
        normalised alias is the normalised ``name``, and whose name or an alias shares its
        ``variant_key``; with ``fuzzy``, also up to that many whose words are within an edit
        or two of the name's, the best matches first; with ``outer``, also up to that many
        whose normalised name holds the normalised ``name`` as whole words, the most
        mentioned first (then the shortest). A bounded read per name, which the caller
        checks with its own rules. None when the backend keeps no such index for the group
        (the embedded store, or a Neo4j group written before the index existed): a caller
        reads the group's entities itself."""
        return None

    def sections_by_title(self, group: str, words: Sequence[str], k: int) -> list[tuple[str, int]] | None:
        """(section id, how many of ``words`` its title holds), for at most ``k`` of the
        group's Section nodes whose title holds at least one of the (lower-case) words as a
        whole word, the most words first, then by id; None when the backend keeps no index of
        section titles for the group (a caller reads the group's sections itself)."""
        return None

    def count_nodes(self, group: str, label: str) -> int:
        """How many nodes of ``label`` the group holds. The default counts a scan; a backend
        counts its (group, label) index."""
        return sum(1 for _ in self.iter_nodes(group, label))

    def document_page(self, group: str, limit: int | None, offset: int = 0) -> list[Node]:
        """One page of the group's Document nodes: at most ``limit`` (all the rest when
        None) after skipping ``offset``, ordered by :func:`title_key` of their ``title``
        property, then by id. What a paged listing reads, with :meth:`count_nodes` for its
        total. The default sorts a scan of the group's documents; a backend reads only the
        page (the embedded store's SQL LIMIT/OFFSET, Cypher SKIP/LIMIT on Neo4j)."""
        docs = sorted(self.iter_nodes(group, Label.DOCUMENT), key=lambda n: (title_key(n.props.get("title")), n.id))
        return docs[offset:] if limit is None else docs[offset : offset + limit]

    def detect_communities(
        self,
        group: str,
        label: str,
        edge_weights: Mapping[str, float],
        *,
        algorithm: str,
        resolution: float,
        seed: int,
    ) -> dict[str, int] | None:
        """The community of every node of ``label`` over the edges of ``edge_weights``' types
        (each edge's weight times its ``count`` or ``similarity`` property), detected inside
        the database where a backend can (Neo4j Graph Data Science, for one); None when it
        cannot, and the communities index step detects them on the client from the entity
        layer it reads. No built-in backend does."""
        return None

    def push_pagerank(
        self,
        group: str,
        seed_ids: Sequence[str],
        seed_weights: Sequence[float],
        *,
        types: Sequence[str],
        weights: Mapping[str, float],
        damping: float,
        eps: float,
        drain: float,
        max_rows: int,
        spread: Mapping[str, Any] | None = None,
    ) -> PushedScores | None:
        """Personalised PageRank from weighted seeds by forward push, run inside the database
        where a backend can (Neo4j with graphroute's procedures installed:
        ``graphroute.push``); None when it cannot, and the ppr stage pushes from the client,
        reading the store a frontier at a time. ``types`` are the walked edge types,
        ``weights`` the path weights by name (entity, section, similar, shares, hub,
        mentions, title), ``eps`` and ``drain`` the push thresholds of
        :mod:`graphroute.plugins.expanders.local_ppr`, ``max_rows`` the most edges one call
        reads (past it the walk stops and its stats say ``truncated``). ``spread``, when
        given, asks for the remainder's spread of
        :func:`graphroute.plugins.expanders.local_ppr.spread_remainder` to be added to the
        scores in the database: ``volume`` (the typed graph's), ``pool`` (the best entities
        and chunks that get a share) and ``weights`` (per label, per edge type: what an edge
        end adds to a degree, :func:`~graphroute.plugins.expanders.local_ppr.degree_weights`);
        the stats then say ``spread_to``. The built-in embedded store returns None."""
        return None

    def pushes_in_database(self) -> bool:
        """Whether :meth:`push_pagerank` runs in this backend (what ``graphroute stats``
        reports as ``ppr_push``)."""
        return False

    @abstractmethod
    def counts(self, group: str) -> dict[str, dict[str, int]]:
        """``{"nodes": {label: n}, "edges": {type: n}, "vectors": {space: n}}``."""
