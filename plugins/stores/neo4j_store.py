"""The Neo4j store: the same protocol on a Neo4j server (5.26 or a 2025+ release), through the official driver.

Model (everything carries ``group``; no query ever matches without it):

* ``(:GRNode {group, id, label, doc_id, props})`` - ``props`` is JSON text (Neo4j
  properties cannot hold maps); scalar values of the looked-up props (``name``, ``norm``,
  ``path``, ``title``, ``alias``) are copied to ``p_<prop>`` and indexed for ``find_nodes``.
  Unique constraint on ``(group, id)``; range indexes on ``(group, label)``,
  ``(group, doc_id)`` and ``(group, label, p_<prop>)``. Full-text indexes: chunks' and
  sentences' text (``gr_text``, ``gr_sentence_text``: BM25 and the "not found" rules), and
  entities' names and sections' title words (``gr_entity_names``, ``gr_section_titles``:
  seed resolution and the keyword fallback), each with a ``GRMeta`` flag saying a group's
  nodes were all written with it (``upgrade_group`` backfills a group written before).
* Relationships of the edge's real type, ``{group, doc_id, props}``; identified by
  ``(src, type, dst)`` like the embedded store (``MERGE``), never dangling (both endpoints
  are ``MATCH``-ed first). The batches of new documents that ``write_batches`` keeps in
  flight ``CREATE`` their nodes and every edge that touches one of them instead (nothing
  of theirs exists yet), and fall back to ``MERGE`` when a node does. A relationship type is the one
  thing spliced into write queries (Cypher's dynamic ``$(type)`` makes MERGE scan every relationship): only names from the
  allow-list (EdgeType plus the ``extra_edge_types`` setting, each ``[A-Z][A-Z0-9_]*``).
  Values - ids, titles, group names, text - are always parameters.
* Lookups by id carry ``USING INDEX n:GRNode(group, id)``: left alone, the planner prefers
  the (group) index and filters the whole group for every row. The write statements
  (``UNWIND ... MERGE`` of edges, ``SET`` of vectors) say ``USING INDEX SEEK``: with the
  plain hint their plan *scanned* the whole (group, id) index for every row (PROFILE:
  3,003,003 db hits for 1,000 rows over 3,000 nodes, 10-25x slower, and growing with every
  node in the database).
* Vectors are node properties ``vec_<space>_<dim>`` with one cosine vector index per
  (space, dimension), created idempotently before the first write of that space.
* ``(:GRMeta {group, version, dim_<space>})`` holds the version and vector dimensions;
  ``(:GRMetaEntry {group, key, value})`` the JSON metadata; ``(:GRCounter)`` the global
  counter that versions come from (so versions never go back, even after delete_group).
* ``(:GRIndexLock {group, owner, holder, until})`` is a group's index lock
  (:meth:`Neo4jStore.index_lock`): a lease its holder renews while it runs, so a run that
  was killed holds it for at most ``LOCK_LEASE_S`` more.

Vector search restricted to a group: a small group's space (``exact_max`` vectors or fewer)
is read once per store version and searched exactly in the client
(:class:`~graphroute.core.lib.vector_matrix.VectorMatrix`, as the embedded store does); a
large group's ``restrict_to`` list is scanned exactly with ``vector.similarity.cosine``; a
large group queries the index with oversampling and a group filter, and falls back to the
exact scan when the index does not yield k hits of the group (a big neighbouring group can
crowd the index's candidates out). Neo4j reports cosine as ``(1 + cos) / 2``; results are
converted back to plain cosine so both backends return the same scores.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import numpy as np
from graphroute.core.api.components import ComponentParams, StoreBackend
from graphroute.core.api.constants import NEO4J_DEV_PASSWORD
from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.core.api.neighbourhood import (
    NeighbourCounts,
    Neighbourhood,
    PushedScores,
    TypeDegrees,
)
from graphroute.core.api.store import (
    Direction,
    DocumentBatch,
    GraphStore,
    MetaPatch,
    TextMatch,
    VectorBatch,
    batched,
    checked_vectors,
    dump_props,
    is_scalar,
    load_props,
    nodes_equal_to,
    patched_meta,
    per_version,
)
from graphroute.core.errors import (
    GroupBusyError,
    StoreError,
    StoreLocationError,
    StoreUnavailableError,
)
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.entities import ENTITY_ID_PREFIX, normalize_name, variant_key
from graphroute.core.lib.net import is_loopback
from graphroute.core.lib.vector_matrix import VectorMatrix
from pydantic import Field

if TYPE_CHECKING:
    from neo4j import Driver, ManagedTransaction

SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")
INDEXED_PROPS: tuple[str, ...] = ("name", "norm", "path", "title", "alias")
_TYPE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_SPACE_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_BATCH = 1000
# Nodes of a batch of new documents created by one statement with the edges between them
# (Neo4jStore._create_new); a larger batch takes the MERGE path, 1,000 rows a statement.
_CREATE_MAX = 20_000
# Ids per neighbours / neighbour_counts statement: a local walk's whole frontier in one round
# trip (a round of the push on a million sentences reads a few thousand nodes).
_FRONTIER_BATCH = 10_000
# What a write sets on a node (``n``) and on an edge (``r``) from its parameter ``row``, the
# same whether the statement MERGEs or CREATEs them.
_NODE_SET = (
    "SET n.label = row.label, n.doc_id = row.doc_id, n.props = row.props, n.p_text = row.text, "
    "n.p_sentence = row.sentence, n.p_ename = row.ename, n.p_ekeys = row.ekeys, n.p_mentions = row.mentions, "
    "n.p_twords = row.twords, "
    + ", ".join(f"n.p_{p} = row.{p}" for p in INDEXED_PROPS)
    + " SET n += row.vec"
)
# Nodes whose text (after their document's title, as the bm25 baseline indexes it) goes into
# a full-text index, by label: the row column and property that hold it, and the index. What
# search_text ranks, inside the server. Sentences have an index of their own, so a chunk's
# BM25 statistics (document frequencies, mean length) stay those of the chunks alone.
TEXT_INDEXES: dict[str, tuple[str, str]] = {"TextChunk": ("text", "gr_text"), "Sentence": ("sentence", "gr_sentence_text")}
# GRMeta flag: every Sentence of the group was written with its text indexed (set when the
# group's meta node is made, and when the group is emptied); a group written before the
# sentence index existed lacks it, and its sentences are ranked in the client instead.
SENTENCE_TEXT_FLAG = "sentence_text"
UPGRADE_BATCH = 5_000  # nodes per transaction when upgrade_group indexes a group written before an index
# Entities' names and sections' title words, each in a full-text index that splits on
# whitespace alone: the texts are normalised when written, so an index term is exactly a
# word of a name (or a title), and a phrase is exactly a run of whole words. What
# entity_candidates and sections_by_title read, a bounded number of rows per question.
# ``p_ename``: an entity's normalised name; ``p_ekeys``: one term per whole normalised alias
# and variant key (_name_key); ``p_twords``: a section title's lower-cased words, once each.
NAME_INDEX, TITLE_INDEX = "gr_entity_names", "gr_section_titles"
# GRMeta flag: every Entity and Section of the group was written with those columns (set
# like SENTENCE_TEXT_FLAG); without it the seed stages read the group in the client.
NAMES_FLAG = "name_index"
NAME_SCAN = 20_000  # index hits (of every group) an outer-name or title look-up ranks at most
# GRMeta flag: the group was deleted (its meta node stays; any write clears the flag)
DELETED_FLAG = "deleted"
_META_MERGE = (  # wherever the meta node may be made
    f"MERGE (m:GRMeta {{group: $g}}) ON CREATE SET m.{SENTENCE_TEXT_FLAG} = true, m.{NAMES_FLAG} = true"
)
_LUCENE_TERM = re.compile(r"\w+", re.UNICODE)
_EDGE_SET = "SET r.group = $g, r.doc_id = row.doc_id, r.props = row.props"
# An index lock's lease (ms) and how often its holder renews it: a holder that stops
# renewing (killed, cut off from the server) frees the group once its lease runs out.
LOCK_LEASE_MS = 30_000
LOCK_RENEW_S = 5.0
SCHEMA_ATTEMPTS = 5  # tries of one schema statement on a transient error (deadlock between two new stores)
T = TypeVar("T")
NEAR_SLOP = 3  # match_text's ``near``: the words within three positions, either order
STEM_TRIM = 3  # letters a fuzzy look-up drops from a long word's end (the stemmer drops a suffix)
# a word as Lucene's tokenizer keeps it: letters and digits, inner apostrophes ("it'll")
_LUCENE_WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)


def _indexed_text(label: str, props: Mapping[str, Any]) -> str | None:
    """What a node of ``label`` puts in its full-text index: its document's title, a line
    break, its text; None for a label without one, or no text."""
    text = props.get("text")
    if label not in TEXT_INDEXES or not isinstance(text, str) or not text.strip():
        return None
    title = props.get("document") or props.get("title")
    return f"{title}\n{text}" if title else text


def _name_key(kind: str, text: str) -> str:
    """One index term standing for a whole normalised name (``kind``: "a" an alias, "v" a
    variant key): a hash in letters and digits, so neither the analyzer nor the query parser
    splits or reads anything in it."""
    return kind + hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def _name_columns(label: str, node_id: str, props: Mapping[str, Any]) -> dict[str, Any]:
    """What an Entity (``ename``, ``ekeys``, ``mentions``) or a Section (``twords``) puts in
    the name indexes: the keys seed resolution's client lexicon (plugins/seeds) builds from
    the same properties, so a look-up finds the entities the lexicon would."""
    out: dict[str, Any] = {"ename": None, "ekeys": None, "mentions": None, "twords": None}
    if label == Label.ENTITY:
        norm = str(props.get("norm") or node_id.removeprefix(ENTITY_ID_PREFIX))
        keys = [_name_key("v", v) for v in [variant_key(norm)] if v]
        for alias in props.get("aliases") or []:
            a = normalize_name(str(alias))
            keys += [_name_key("a", a), _name_key("v", variant_key(a))] if a else []
        mc = props.get("mention_count")
        out.update(ename=norm, ekeys=" ".join(dict.fromkeys(keys)), mentions=int(mc) if isinstance(mc, int | float) else 0)
    elif label == Label.SECTION:
        out["twords"] = " ".join(dict.fromkeys(re.findall(r"\w+", str(props.get("title") or "").lower())))
    return out


_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


def _lucene_escaped(word: str) -> str:
    return _LUCENE_SPECIAL.sub(r"\\\1", word)


# a dotted word ("upload.timeout", "file.txt"): letters and digits and inner full stops only,
# none of them query syntax
_DOTTED = re.compile(r"\w+(?:\.\w+)+")


def _lucene_any(words: Sequence[str], fuzzy: bool) -> str:
    """A Lucene clause matching any of ``words`` (each its word characters and inner
    apostrophes only, so no query syntax reaches the parser; a word of several parts as a
    phrase, and a dotted one also as the one term the analyzer makes of it). ``fuzzy``: a
    one-part word also matches terms within one edit (two from six characters), and a long
    word's first letters within two (the index holds stems, which
    Lucene does not derive for a fuzzy term: "margraviate" is held as "margravi"); the index
    also keeps accents, so a caller's folded or otherwise spelled word still finds the
    texts it then checks itself."""
    out: list[str] = []
    for w in words:
        parts = _LUCENE_WORD.findall(w)
        if len(parts) > 1:
            out.append('"' + " ".join(parts) + '"')
            if _DOTTED.fullmatch(w):  # and as one term, which is how the analyzer holds "upload.timeout"
                out.append(w)
        elif parts:
            t = parts[0]
            out.append(t)
            if fuzzy and len(t) > 2:
                out.append(f"{t}~{1 if len(t) < 6 else 2}")
            if fuzzy and len(t) > STEM_TRIM + 4:
                out.append(f"{t[:-STEM_TRIM]}~2")
    return f"({' '.join(out)})" if out else ""


_SCHEMA = (
    "CREATE CONSTRAINT gr_node_key IF NOT EXISTS FOR (n:GRNode) REQUIRE (n.group, n.id) IS UNIQUE",
    "CREATE CONSTRAINT gr_meta_key IF NOT EXISTS FOR (m:GRMeta) REQUIRE m.group IS UNIQUE",
    "CREATE CONSTRAINT gr_meta_entry_key IF NOT EXISTS FOR (e:GRMetaEntry) REQUIRE (e.group, e.key) IS UNIQUE",
    "CREATE CONSTRAINT gr_counter_key IF NOT EXISTS FOR (c:GRCounter) REQUIRE c.id IS UNIQUE",
    "CREATE CONSTRAINT gr_index_lock_key IF NOT EXISTS FOR (l:GRIndexLock) REQUIRE l.group IS UNIQUE",
    "CREATE INDEX gr_node_group IF NOT EXISTS FOR (n:GRNode) ON (n.group)",
    "CREATE INDEX gr_node_label IF NOT EXISTS FOR (n:GRNode) ON (n.group, n.label)",
    "CREATE INDEX gr_node_doc IF NOT EXISTS FOR (n:GRNode) ON (n.group, n.doc_id)",
    *(
        f"CREATE INDEX gr_node_p_{p} IF NOT EXISTS FOR (n:GRNode) ON (n.group, n.label, n.p_{p})"
        for p in INDEXED_PROPS
    ),
    # Lucene's English analyzer (lower case, stop words, Porter stemming), BM25 scores
    *(
        f"CREATE FULLTEXT INDEX {index} IF NOT EXISTS FOR (n:GRNode) ON EACH [n.p_{column}] "
        "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}"
        for column, index in TEXT_INDEXES.values()
    ),
    f"CREATE FULLTEXT INDEX {NAME_INDEX} IF NOT EXISTS FOR (n:GRNode) ON EACH [n.p_ename, n.p_ekeys] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'whitespace'}}",
    f"CREATE FULLTEXT INDEX {TITLE_INDEX} IF NOT EXISTS FOR (n:GRNode) ON EACH [n.p_twords] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'whitespace'}}",
)


def _public_uri(uri: str) -> str:
    """The URI without any user:password@ part, for messages."""
    return re.sub(r"//[^/@]*@", "//", uri)


def _is_loopback(uri: str) -> bool:
    """Whether a Neo4j URI names this machine (where the dev server's password is the default)."""
    from urllib.parse import urlsplit

    try:
        return is_loopback(urlsplit(uri).hostname or "")
    except ValueError:
        return False


def _batches(rows: Sequence[T], size: int = _BATCH) -> Iterator[Sequence[T]]:
    return batched(rows, size)


# How a vector-index search keeps the group's k hits among its candidates: the first k in
# the index's best-first yield order, or (if that order ever comes back unsorted) k by sorting
_BEST_FIRST = "WITH node, score LIMIT $k"
_SORTED = "WITH node, score ORDER BY score DESC, node.id LIMIT $k"


def _space_name(space: str) -> str:
    s = str(space)
    if not _SPACE_RE.match(s):
        raise StoreError(f"vector space name {s!r} must match {_SPACE_RE.pattern}")
    return s


def _vec_prop(space: str, dim: int) -> str:
    return f"vec_{_space_name(space)}_{int(dim)}"


def quiet_driver_log() -> None:
    """Keep the driver's own warnings and errors ("Transaction failed and will be retried",
    "Unable to retrieve routing information", which a ``neo4j://`` URI logs at ERROR on every
    connection attempt) off stderr: the store reports failures itself, as StoreErrors naming
    the server and the cause. Only when the application has not configured the ``neo4j``
    logger itself."""
    driver_log = logging.getLogger("neo4j")
    if driver_log.level == logging.NOTSET and not driver_log.handlers:
        driver_log.setLevel(logging.CRITICAL)


def _connect_failure(exc: BaseException) -> str:
    """Why the driver could not connect, in its own words. A routing URI (``neo4j://``) wraps
    each address's failure (connection refused, a TLS handshake with a server without TLS)
    in an ExceptionGroup under "Unable to retrieve routing information", which alone says
    nothing a user can act on: the wrapped reasons are what is shown."""
    group = exc.__cause__
    if isinstance(group, BaseExceptionGroup) and group.exceptions:
        return "; ".join(str(sub) for sub in group.exceptions)
    return str(exc)


class _Vector(list):  # type: ignore[type-arg]
    """A vector parameter: a plain list to the driver's packer, with a short ``repr``.

    Why: the driver's ``Bolt.run`` builds its debug-log line with ``repr`` of every
    parameter *before* the logger decides to drop it, so a plain list prints a batch's
    vectors to text on every write (1.4 s of the client's 1.9 s CPU for 5,000 sentences,
    ``str.join`` in ``_bolt5.run``). The packer sends a list subclass exactly as a list."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<vector of {len(self)} floats>"


@dataclass
class _HeldSpace:
    """What the client keeps of one (group, space) for a store version: its vector count,
    the matrix of a small one, and a large one's last index search (query vector bytes and
    its hits, best first; one tuple, replaced whole)."""

    count: int
    matrix: VectorMatrix | None = None
    last: tuple[bytes, tuple[tuple[str, float], ...]] | None = None


# How long the driver waits for a connection, a new one's Bolt handshake included (the
# driver's default is 60 s); waits for a free pooled connection are bounded by it too
CONNECT_WAIT_S = 15.0
# What the driver says when the address answers, but not in Bolt: a port that never answers
# the handshake, an HTTP server, other bytes
_NOT_BOLT = ("Bolt handshake", "looks like HTTP", "check for incorrect port number")

# graphroute.push's VERSION (neo4j-procedures/): a server with another is not used
PUSH_PROCEDURE_VERSION = 3


class Neo4jStore(GraphStore):
    """GraphStore on a Neo4j server (5.26 or 2025+) (see the module docstring for the model)."""

    backend = "neo4j"

    def __init__(
        self,
        uri: str,
        user: str,
        password: str,
        *,
        database: str | None = None,
        exact_max: int = 2_000,
        oversample: int = 10,
        retry_s: float = 30.0,
        read_retry_s: float = 1.0,
        connect_attempts: int = 3,
        extra_edge_types: Collection[str] = (),
        write_concurrency: int = 2,
        vector_quantization: bool = False,
        index_wait_s: float = 7_200.0,
    ) -> None:
        import neo4j
        from neo4j.exceptions import AuthError, ServiceUnavailable

        self.location = _public_uri(uri)
        self._database = database
        self.read_retry_s = read_retry_s
        quiet_driver_log()
        self.exact_max = exact_max
        self.oversample = oversample
        self.write_concurrency = write_concurrency
        self.vector_quantization = vector_quantization
        self.index_wait_s = index_wait_s  # how long bulk_load waits for its index builds
        self._edge_types = {str(t) for t in EdgeType} | {str(t) for t in extra_edge_types}
        self._push_procedure: bool | None = None  # graphroute.push in the server (pushes_in_database)
        self._text_shares: dict[tuple[str, str], float] = {}  # (full-text index, group): its share of the last hits
        bad = [t for t in self._edge_types if not _TYPE_RE.match(t)]
        if bad:
            raise StoreError(f"edge types {bad} must match {_TYPE_RE.pattern}")
        self._vector_indexes: set[str] = set()
        # inside bulk_load: the vector indexes to create when it ends, (space, dim) by name
        self._deferred_vector_indexes: dict[str, tuple[str, int]] | None = None
        # How the last vector_search was answered: "exact", "index" or "index+exact"
        # (the index did not yield k hits of the group); read by tests and traces.
        self.last_search_path = ""
        # user:password@ in the URI wins over settings; the driver never sees it (its own
        # errors would echo the URI, password included).
        m = re.match(r"^([^:/]+://)([^/@]*)@(.*)$", uri)
        # where a refused login's credentials came from, so the message names what to change
        fix_credentials = "set NEO4J_USER / NEO4J_PASSWORD (or `graphroute --neo4j-user USER --neo4j-password PASSWORD COMMAND ...`)"
        if m:
            userinfo = m.group(2)
            user, _, pw = userinfo.partition(":")
            password = unquote(pw) if pw else password
            user = unquote(user)
            uri = m.group(1) + m.group(3)
            fix_credentials = (
                "fix the user:password in the store URI (it wins over NEO4J_USER / NEO4J_PASSWORD)" if pw
                else "fix the user in the store URI, or set NEO4J_PASSWORD (or `graphroute --neo4j-password PASSWORD COMMAND ...`)"
            )
        try:
            self._driver: Driver = neo4j.GraphDatabase.driver(
                uri, auth=(user, password), max_transaction_retry_time=retry_s, connection_timeout=10.0,
                # also bounds a new connection's Bolt handshake: an address that takes TCP but
                # never answers it (an HTTP port, e.g. the browser's 7474) held each attempt 60 s
                connection_acquisition_timeout=CONNECT_WAIT_S,
            )
        except Exception as exc:  # the driver's own message may echo the URI, password included
            raise StoreLocationError(f"invalid Neo4j location {self.location}: {type(exc).__name__}") from None
        delay = 0.5
        for attempt in range(1, connect_attempts + 1):
            try:
                self._driver.verify_connectivity()
                break
            except AuthError as exc:
                self._driver.close()
                raise StoreUnavailableError(
                    f"Neo4j at {self.location} rejected the credentials of user {user!r} "
                    f"({exc.message or type(exc).__name__}); {fix_credentials}"
                ) from None
            except Exception as exc:
                reason = _connect_failure(exc)
                if any(sign in reason for sign in _NOT_BOLT):  # something answers there, not Bolt: no use retrying
                    self._driver.close()
                    raise StoreLocationError(
                        f"the server at {self.location} does not answer Neo4j's Bolt protocol: {reason}\n"
                        "check the port of the store URI (--store, NEO4J_URI): Neo4j's Bolt port (7687 unless "
                        "the server sets another), not its HTTP port (7474)"
                    ) from None
                if isinstance(exc, ValueError):  # the driver's reading of the address (a port that is no number)
                    self._driver.close()
                    raise StoreLocationError(f"invalid Neo4j location {self.location}: {exc}") from None
                if not isinstance(exc, ServiceUnavailable | OSError):
                    self._driver.close()
                    raise StoreError(f"cannot connect to Neo4j at {self.location}: {exc}") from None
                if attempt == connect_attempts:
                    self._driver.close()
                    raise StoreUnavailableError(
                        f"Neo4j at {self.location} is unreachable after {attempt} attempts: "
                        f"{reason}\ncheck that the server is running and that the store URI "
                        "(--store, NEO4J_URI) names its Bolt address and scheme"
                    ) from None
                time.sleep(delay)
                delay *= 2
        for statement in _SCHEMA:
            self._run_schema(statement)
        # Edge ownership lookups (replace_doc, delete_document) seek a per-type relationship
        # index instead of expanding every edge of the group. Types are allow-listed above.
        for t in sorted(self._edge_types):
            self._run_schema(
                f"CREATE INDEX gr_rel_doc_{t.lower()} IF NOT EXISTS FOR ()-[r:`{t}`]-() ON (r.group, r.doc_id)"
            )
        self._delete_owned_edges = " ".join(
            f"CALL () {{ MATCH ()-[r:`{t}`]->() WHERE r.group = $g AND r.doc_id = $d DELETE r }}"
            for t in sorted(self._edge_types)
        ) + " RETURN 1"

    # ------------------------------------------------------------------ plumbing
    def _session(self, *, read: bool = False) -> Any:
        """A session; a read one says so (a cluster routes it to a reader). Reads are retried
        for ``read_retry_s`` only (:meth:`_read`), so a server that is down is reported in
        seconds (health checks, queries), while writes keep the driver's longer ``retry_s``
        to ride out a busy server."""
        config: dict[str, Any] = {"default_access_mode": "READ"} if read else {}
        if self._database:
            config["database"] = self._database
        return self._driver.session(**config)

    def ping(self) -> None:
        """One round trip to the server, not retried: StoreUnavailableError at once when it
        is down (connection refused), after the driver's connection timeout when it does not
        answer at all."""
        self._guard("health check", self._driver.verify_connectivity)

    def _guard(self, what: str, fn: Callable[[], T]) -> T:
        """Map driver failures to StoreError naming the server and the cause."""
        from neo4j.exceptions import (
            AuthError,
            DriverError,
            Neo4jError,
            ServiceUnavailable,
            SessionExpired,
        )

        try:
            return fn()
        except StoreError:
            raise
        except (ServiceUnavailable, SessionExpired) as exc:
            raise StoreUnavailableError(
                f"Neo4j at {self.location} became unreachable during {what}: {_connect_failure(exc)}"
            ) from exc
        except AuthError as exc:
            raise StoreUnavailableError(f"Neo4j at {self.location} rejected the credentials during {what}") from exc
        except Neo4jError as exc:
            if exc.code == "Neo.ClientError.Database.DatabaseNotFound":  # the `database` store parameter
                raise StoreLocationError(
                    f"Neo4j at {self.location} has no database {self._database!r}; name one it has in the neo4j "
                    "store parameter `database` (GRAPHROUTE_STORE_PARAMS; Cypher `SHOW DATABASES` lists them), "
                    "or leave it unset for the server's default"
                ) from None
            raise StoreError(f"Neo4j at {self.location} failed during {what}: {exc}") from exc
        except DriverError as exc:
            raise StoreError(f"Neo4j at {self.location} failed during {what}: {exc}") from exc

    def _read(self, what: str, cypher: str, params: dict[str, Any]) -> list[Any]:
        """The records of one read statement, run as an auto-commit transaction and retried
        on transient failures for ``read_retry_s`` with backoff, as the driver's managed
        transactions retry. Why not one of those (``execute_read``): its BEGIN and COMMIT
        cost a round trip more per statement (``RETURN 1``: 0.96 against 0.60 ms p50 on the
        project's server), and a question sends ~30 statements."""
        from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

        def run() -> list[Any]:
            deadline = time.monotonic() + self.read_retry_s
            delay = 0.05
            while True:
                try:
                    with self._session(read=True) as session:
                        return list(session.run(cypher, params))
                except (TransientError, SessionExpired, ServiceUnavailable):
                    if time.monotonic() + delay > deadline:
                        raise
                    time.sleep(delay)
                    delay *= 2

        return self._guard(what, run)

    def _write_tx(self, what: str, fn: Callable[[ManagedTransaction], T]) -> T:
        def run() -> T:
            with self._session() as session:
                return session.execute_write(fn)

        return self._guard(what, run)

    def _query(self, what: str, cypher: str, **params: Any) -> list[Any]:
        return self._read(what, cypher, params)

    def _rows(self, what: str, statement: str, columns: Sequence[str], **params: Any) -> list[dict[str, Any]]:
        """The rows of ``statement`` (which ends in ``RETURN`` of ``columns``), sent back as one
        record that holds them all, in the statement's order. Why: the driver spends tens of
        microseconds on each record it receives, far more than the server spends on a short
        row; a walk's frontier or a thousand vector hits are one record, not a thousand."""
        listed = ", ".join(columns)
        rows = self._query(what, f"CALL () {{ {statement} }} RETURN collect([{listed}]) AS rows", **params)
        return [dict(zip(columns, r, strict=True)) for r in rows[0]["rows"]] if rows else []

    def _run_schema(self, statement: str) -> None:
        """Schema statements run in auto-commit transactions, which the driver does not retry;
        two processes opening a fresh database at once can collide here ("DeadlockDetected",
        a transient error), so transient failures are retried with a short backoff."""
        from neo4j.exceptions import TransientError

        def run() -> None:
            for attempt in range(SCHEMA_ATTEMPTS):
                try:
                    with self._session() as session:
                        session.run(statement).consume()
                    return
                except TransientError:
                    if attempt == SCHEMA_ATTEMPTS - 1:
                        raise
                    time.sleep(0.1 * 2**attempt)

        self._guard("schema setup", run)

    def close(self) -> None:
        self._driver.close()

    # ------------------------------------------------------------------ index runs
    @contextmanager
    def index_lock(self, group: str) -> Iterator[None]:
        """A lease on the group's ``GRIndexLock`` node, taken when it is free or its lease has
        run out, renewed by a thread every ``LOCK_RENEW_S`` and deleted at the end. The
        ``SET`` before the check takes the node's write lock, so two runs that find the same
        lease run out cannot both take it (the second reads the first's commit)."""
        owner = uuid.uuid4().hex
        holder = f"{socket.gethostname()} pid {os.getpid()}"

        def take(tx: ManagedTransaction) -> Any:
            return tx.run(
                "MERGE (l:GRIndexLock {group: $g}) SET l.taking = true WITH l "
                "WITH l, coalesce(l.until, 0) < timestamp() AS free "
                "SET l.owner = CASE WHEN free THEN $owner ELSE l.owner END, "
                "l.holder = CASE WHEN free THEN $holder ELSE l.holder END, "
                "l.until = CASE WHEN free THEN timestamp() + $lease ELSE l.until END "
                "REMOVE l.taking RETURN l.owner = $owner AS mine, l.holder AS holder, l.until - timestamp() AS left",
                g=group, owner=owner, holder=holder, lease=LOCK_LEASE_MS,
            ).single()

        got = self._write_tx("index lock", take)
        if not got["mine"]:
            raise GroupBusyError.for_group(
                group, self.location, got["holder"],
                f" (if that run was killed, the group is free again within {math.ceil(max(0, got['left']) / 1000)} s)",
            )
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(LOCK_RENEW_S):
                try:
                    self._write_tx("index lock", lambda tx: tx.run(
                        "MATCH (l:GRIndexLock {group: $g, owner: $owner}) SET l.until = timestamp() + $lease",
                        g=group, owner=owner, lease=LOCK_LEASE_MS,
                    ).consume())
                except StoreError as exc:  # the server is away; the run's own writes report it
                    logging.getLogger(__name__).warning("could not renew the index lock of group %r: %s", group, exc)

        thread = threading.Thread(target=renew, name="graphroute-index-lock", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            with suppress(StoreError):  # unreleased, the lease runs out by itself
                self._write_tx("index lock", lambda tx: tx.run(
                    "MATCH (l:GRIndexLock {group: $g, owner: $owner}) DELETE l", g=group, owner=owner
                ).consume())

    # ------------------------------------------------------------------ version
    @staticmethod
    def _bump(tx: ManagedTransaction, group: str, *, deleted: bool = False) -> None:
        """The group's new version from the global counter, as the transaction's last write;
        the meta node is marked deleted by a group's delete and unmarked by any other write.

        Lock order: the first ``SET`` only takes the lock on the group's ``GRMeta``, so every
        transaction locks it before the ``GRCounter``, the order ``_check_dim`` (which writes
        only the meta node, and only for a new dimension) already takes. With the counter
        first, a write recording a dimension (meta, then counter) and a plain write of the
        same group (counter, then meta) could each hold one lock and wait for the other. Two first writes of a group still deadlock (on the
        meta node alone; the driver retries after ~1 s), which ``write_batches`` avoids by
        writing its first batch alone."""
        tx.run(
            f"{_META_MERGE} SET m.version = coalesce(m.version, 0), m.{DELETED_FLAG} = $deleted "
            "WITH m MERGE (c:GRCounter {id: 0}) SET c.value = coalesce(c.value, 0) + 1 "
            "SET m.version = c.value",
            g=group, deleted=True if deleted else None,
        ).consume()

    # ------------------------------------------------------------------ groups and metadata
    def groups(self) -> list[str]:
        rows = self._query(
            "groups",
            "MATCH (m:GRMeta) WHERE EXISTS { MATCH (n:GRNode {group: m.group}) } "
            "OR EXISTS { MATCH (e:GRMetaEntry {group: m.group}) } RETURN m.group AS g ORDER BY g",
        )
        return [r["g"] for r in rows]

    def get_meta(self, group: str, key: str) -> Any | None:
        rows = self._query(
            "get_meta", "MATCH (e:GRMetaEntry {group: $g, key: $k}) RETURN e.value AS v", g=group, k=key
        )
        return json.loads(rows[0]["v"]) if rows else None

    @staticmethod
    def _set_meta(tx: ManagedTransaction, group: str, meta: Mapping[str, Any]) -> None:
        """Set ``meta`` in the caller's transaction; a MetaPatch is merged into the stored
        value, read after the transaction has taken the entry's write lock (the SET/REMOVE
        of a scratch property), so a concurrent patch of the same entry waits for this one
        to commit and then reads its result."""
        meta = dict(meta)
        for key, value in meta.items():
            if isinstance(value, MetaPatch):
                row = tx.run(
                    "MERGE (e:GRMetaEntry {group: $g, key: $k}) SET e._lock = true REMOVE e._lock RETURN e.value AS v",
                    g=group, k=key,
                ).single()
                current = json.loads(row["v"]) if row is not None and row["v"] is not None else None
                meta[key] = patched_meta(current, value)
        tx.run(
            "UNWIND $rows AS row MERGE (e:GRMetaEntry {group: $g, key: row.k}) SET e.value = row.v",
            g=group,
            rows=[{"k": k, "v": json.dumps(v, ensure_ascii=False)} for k, v in meta.items()],
        ).consume()

    def set_meta(self, group: str, key: str, value: Any) -> None:
        def work(tx: ManagedTransaction) -> None:
            self._set_meta(tx, group, {key: value})
            self._bump(tx, group)

        self._write_tx("set_meta", work)

    def version(self, group: str) -> int:
        rows = self._query("version", "MATCH (m:GRMeta {group: $g}) RETURN m.version AS v", g=group)
        return int(rows[0]["v"] or 0) if rows else 0

    def _dims(self, group: str) -> dict[str, int]:
        """space -> dimension of the group's vectors."""
        rows = self._query("vector dims", "MATCH (m:GRMeta {group: $g}) RETURN properties(m) AS p", g=group)
        if not rows:
            return {}
        return {k[4:]: int(v) for k, v in rows[0]["p"].items() if k.startswith("dim_")}

    def _read_dims(self, group: str) -> dict[str, int]:
        """:meth:`_dims` for the query path: read once per store version (a question's vector
        searches asked the server each time, 1-2 ms apiece)."""
        return per_version(self, group, "vector_dims", lambda: self._dims(group))

    def _dims_recorded(self, group: str, spaces: Collection[str]) -> bool:
        return set(spaces) <= set(self._dims(group))

    # ------------------------------------------------------------------ writes
    def _ensure_vector_index(self, space: str, dim: int) -> None:
        prop = _vec_prop(space, dim)
        if prop in self._vector_indexes:
            return
        if self._deferred_vector_indexes is not None:
            self._deferred_vector_indexes[f"gr_{prop}"] = (space, dim)
            return
        # prop is built from a validated space name and an int: safe to splice.
        # Quantization off by default: the index then ranks by the stored floats (no
        # approximate pass to rescore), and each insert skips quantizing the vector (~8% of
        # the server's CPU in a batch write on 2026.08). It applies when the index is created.
        quantized = "true" if self.vector_quantization else "false"
        options = (
            f"{{indexConfig: {{`vector.dimensions`: {int(dim)}, `vector.similarity_function`: 'cosine', "
            f"`vector.quantization.enabled`: {quantized}}}}}"
        )
        self._run_schema(f"CREATE VECTOR INDEX gr_{prop} IF NOT EXISTS FOR (n:GRNode) ON (n.{prop}) OPTIONS {options}")
        self._vector_indexes.add(prop)

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Drop the vector indexes (every group's) for the block and create them when it
        ends, waiting until Neo4j has built them (``index_wait_s`` at most).

        Why: kept up per write, an HNSW index grows by small segments that Lucene merges
        again and again, each merge re-inserting the vectors of the smaller segments into the
        larger one's graph; at a million sentences the merge threads held 75% of the server's
        CPU (JFR, graph-gen's documents phase), and the write ran at ~210 sentences/s on a
        loaded 2-core machine. Built once from the store, the index is populated in large
        segments. While the block runs, vector search in any group of the database fails: a
        tool for loading a new database or a maintenance window, not for a served one."""
        if self._deferred_vector_indexes is not None:
            yield  # nested: the outer block builds them
            return
        rows = self._query(
            "vector indexes", "SHOW VECTOR INDEXES YIELD name WHERE name STARTS WITH 'gr_vec_' RETURN name"
        )
        deferred: dict[str, tuple[str, int]] = {}
        for r in rows:
            m = re.match(r"^gr_vec_([a-z][a-z0-9_]*)_(\d+)$", r["name"])
            if m:
                deferred[r["name"]] = (m.group(1), int(m.group(2)))
                self._run_schema(f"DROP INDEX `{r['name']}` IF EXISTS")  # a name that matched the pattern above
        self._vector_indexes.clear()
        self._deferred_vector_indexes = deferred
        try:
            yield
        finally:
            self._deferred_vector_indexes = None
            for space, dim in deferred.values():
                self._ensure_vector_index(space, dim)
            self._guard("index build", lambda: self._await_indexes())

    def _await_indexes(self) -> None:
        with self._session() as session:
            session.run("CALL db.awaitIndexes($s)", s=int(self.index_wait_s)).consume()

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
        self._write(group, nodes, edges, vectors, replace_doc=replace_doc, meta=meta, bump=True)

    def write_in_flight(self, group: str, batch: DocumentBatch) -> None:
        """A batch of a concurrent :meth:`write_batches`: committed without bumping the
        group's version, which ``write_batches`` bumps once after the last batch. Why: the
        bump writes the group's meta node, whose lock a transaction holds until its commit
        ends, so two writers that both bump commit one after the other; without it their
        commits overlap (20,000 sentences, two writers: median 4,621 against 4,367
        sentences/s).

        The batch's documents are new (``write_batches``' contract), so its nodes are
        ``CREATE``-d together with every edge that touches them in one statement
        (:meth:`_create_new`); a batch that breaks the contract (a node already stored, an
        id twice) fails the unique constraint, rolls back, and is written again through
        ``MERGE``."""
        from neo4j.exceptions import ConstraintError

        try:
            self._write(group, batch.nodes, batch.edges, batch.vectors, replace_doc=None, meta=None, bump=False, create=True)
        except StoreError as exc:
            if not isinstance(exc.__cause__, ConstraintError):
                raise
            # a node of the "new" documents exists already (or one id came twice): the
            # transaction rolled back whole, so write the batch again the way write() does
            self._write(group, batch.nodes, batch.edges, batch.vectors, replace_doc=None, meta=None, bump=False)

    def _write(
        self,
        group: str,
        nodes: Sequence[Node],
        edges: Sequence[Edge],
        vectors: VectorBatch | None,
        *,
        replace_doc: str | None,
        meta: Mapping[str, Any] | None,
        bump: bool,
        create: bool = False,
    ) -> None:
        node_rows = []
        for n in nodes:
            if n.group != group:
                raise StoreError(f"node {n.id!r} belongs to group {n.group!r}, not {group!r}")
            row: dict[str, Any] = {"id": n.id, "label": str(n.label), "doc_id": n.doc_id, "props": dump_props(n.props)}
            for p in INDEXED_PROPS:
                v = n.props.get(p)
                row[p] = v if is_scalar(v) else None
            for column, _ in TEXT_INDEXES.values():
                row[column] = None
            text = _indexed_text(str(n.label), n.props)
            if text is not None:
                row[TEXT_INDEXES[str(n.label)][0]] = text
            row.update(_name_columns(str(n.label), n.id, n.props))
            node_rows.append(row)
        edge_rows: dict[str, list[dict[str, Any]]] = {}
        for e in edges:
            if e.group != group:
                raise StoreError(f"edge {e.src!r}->{e.dst!r} belongs to group {e.group!r}, not {group!r}")
            t = str(e.type)
            if t not in self._edge_types:
                raise StoreError(
                    f"edge type {t!r} is not in the Neo4j store's allow-list; add it with the "
                    "backend's `extra_edge_types` setting"
                )
            edge_rows.setdefault(t, []).append(
                {"src": e.src, "dst": e.dst, "doc_id": e.doc_id, "props": dump_props(e.props)}
            )
        # Vectors of nodes written in this call are set by the node statement itself
        # (``SET n += row.vec``: a map holding only the vector properties this call sets, so
        # a node written without a vector keeps the one it had); only vectors of nodes not in
        # ``nodes`` need a second MATCH pass. Measured on 5,000 sentences: the MATCH pass
        # cost 0.29 s of statement time that the node statement absorbs almost for free.
        node_ids = {row["id"] for row in node_rows}
        inline: dict[str, dict[str, _Vector]] = {}
        vec_batches: list[tuple[str, int, list[dict[str, Any]]]] = []
        for space, (ids, matrix) in (vectors or {}).items():
            m = checked_vectors(space, ids, matrix)
            if not len(ids):
                continue
            name = _space_name(space)
            prop = _vec_prop(name, m.shape[1])
            rest: list[dict[str, Any]] = []
            for i, v in zip(ids, m.tolist(), strict=True):
                if i in node_ids:
                    inline.setdefault(i, {})[prop] = _Vector(v)
                else:
                    rest.append({"id": i, "v": _Vector(v)})
            vec_batches.append((name, m.shape[1], rest))
        for row in node_rows:
            row["vec"] = inline.get(row["id"], {})
        # Schema changes cannot share a transaction with data: create indexes first.
        for name, dim, _ in vec_batches:
            self._ensure_vector_index(name, dim)

        def work(tx: ManagedTransaction) -> None:
            if replace_doc is not None:
                self._delete_doc(tx, group, replace_doc)
            # dimensions first: the node statement below already sets vectors
            for name, dim, _ in vec_batches:
                self._check_dim(tx, group, name, dim)
            merged_nodes: Sequence[dict[str, Any]] = node_rows
            merged_edges = edge_rows
            if create and node_rows and len(node_rows) <= _CREATE_MAX:
                merged_edges = self._create_new(tx, group, node_rows, edge_rows)
                merged_nodes = ()
            for batch in _batches(merged_nodes):
                tx.run(
                    f"UNWIND $rows AS row MERGE (n:GRNode {{group: $g, id: row.id}}) {_NODE_SET}",
                    g=group,
                    rows=list(batch),
                ).consume()
            for etype, typed_rows in sorted(merged_edges.items()):
                for batch in _batches(typed_rows):
                    tx.run(
                        "UNWIND $rows AS row MATCH (a:GRNode {group: $g, id: row.src}) USING INDEX SEEK a:GRNode(group, id) "
                        "MATCH (b:GRNode {group: $g, id: row.dst}) USING INDEX SEEK b:GRNode(group, id) "
                        f"MERGE (a)-[r:`{etype}`]->(b) {_EDGE_SET}",
                        g=group,
                        rows=list(batch),
                    ).consume()
            for name, dim, rows in vec_batches:
                prop = _vec_prop(name, dim)
                for batch in _batches(rows):
                    tx.run(
                        f"UNWIND $rows AS row MATCH (n:GRNode {{group: $g, id: row.id}}) USING INDEX SEEK n:GRNode(group, id) "
                        f"SET n.{prop} = row.v",
                        g=group,
                        rows=list(batch),
                    ).consume()
            if meta:
                self._set_meta(tx, group, meta)
            if bump:
                self._bump(tx, group)

        self._write_tx("write", work)

    @staticmethod
    def _create_new(
        tx: ManagedTransaction, group: str, node_rows: list[dict[str, Any]], edge_rows: dict[str, list[dict[str, Any]]]
    ) -> dict[str, list[dict[str, Any]]]:
        """``CREATE`` the nodes of new documents and every edge with an endpoint among them in
        one statement: an edge between two of them takes both endpoints by position from the
        nodes it just made, an edge between one of them and a stored node seeks the stored
        one by id (no edge is made when it is not stored, as ``MERGE`` makes none). Returns
        the edges between two stored nodes, by type, for the ``MERGE`` path (a new mapping:
        the driver may run the transaction again, so ``edge_rows`` stays whole).

        Why: through ``MERGE`` each edge costs two unique-index seeks and a check of its
        endpoints' relationships, and each node a locking seek, for rows that cannot exist
        yet: a node the statement creates has no edge before it (a document's skeleton edges
        are all inside it; its mentions lead to stored entities). 20,000 sentences, two
        writers, on 2026.08: median 5,186 against 4,398 sentences/s, ~20% less server CPU.
        A repeated edge (same endpoints and type) is created once with its last row's values,
        as ``MERGE`` then ``SET`` would leave it. A node that exists already fails the unique
        constraint, and the caller falls back to ``MERGE`` (:meth:`write_in_flight`)."""
        pos = {row["id"]: i for i, row in enumerate(node_rows)}
        # per type: edges keyed by their endpoints (a position, or a stored node's id)
        inner: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
        outward: dict[str, dict[tuple[int, str], dict[str, Any]]] = {}
        inward: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
        leaving: dict[str, list[dict[str, Any]]] = {}
        for etype, rows in edge_rows.items():
            for e in rows:
                a, b = pos.get(e["src"]), pos.get(e["dst"])
                values = {"doc_id": e["doc_id"], "props": e["props"]}
                if a is not None and b is not None:
                    inner.setdefault(etype, {})[(a, b)] = {"a": a, "b": b, **values}
                elif a is not None:
                    outward.setdefault(etype, {})[(a, e["dst"])] = {"a": a, "id": e["dst"], **values}
                elif b is not None:
                    inward.setdefault(etype, {})[(e["src"], b)] = {"b": b, "id": e["src"], **values}
                else:
                    leaving.setdefault(etype, []).append(e)
        seek = "MATCH (x:GRNode {group: $g, id: row.id}) USING INDEX SEEK x:GRNode(group, id)"
        shapes = (
            (inner, "WITH ns[row.a] AS a, ns[row.b] AS b, row", "(a)-[r:`{t}`]->(b)"),
            (outward, f"WITH ns[row.a] AS a, row {seek}", "(a)-[r:`{t}`]->(x)"),
            (inward, f"WITH ns[row.b] AS b, row {seek}", "(x)-[r:`{t}`]->(b)"),
        )
        # one unit subquery per type and shape: a type cannot be a parameter of CREATE before Cypher 25
        parts: list[str] = []
        params: list[list[dict[str, Any]]] = []
        for by_type, match, pattern in shapes:
            for t in sorted(by_type):
                parts.append(
                    f"CALL (ns) {{ UNWIND $edges[{len(params)}] AS row {match} "
                    f"CREATE {pattern.format(t=t)} {_EDGE_SET} }}"
                )
                params.append(list(by_type[t].values()))
        tx.run(
            f"UNWIND $rows AS row CREATE (n:GRNode {{group: $g, id: row.id}}) {_NODE_SET}"
            + (f" WITH collect(n) AS ns {' '.join(parts)}" if parts else ""),
            g=group,
            rows=node_rows,
            edges=params,
        ).consume()
        return leaving

    @staticmethod
    def _check_dim(tx: ManagedTransaction, group: str, space: str, dim: int) -> None:
        """Refuse vectors whose dimension differs from the group's; record a new space's.

        A read when the dimension is already recorded (every write after a group's first),
        so concurrent writers of one group do not queue on its meta node until they commit.
        Two *first* writes of a group at once still deadlock here (the driver retries after
        ~1 s), which is why :meth:`GraphStore.write_batches` writes its first batch alone."""
        key = f"dim_{space}"
        rec = tx.run("MATCH (m:GRMeta {group: $g}) RETURN m[$key] AS d", g=group, key=key).single()
        if rec is not None and rec["d"] is not None and int(rec["d"]) == dim:
            return
        rec = tx.run(f"{_META_MERGE} RETURN m[$key] AS d", g=group, key=key).single()
        old = rec["d"] if rec else None
        if old is not None and int(old) != dim:
            left = tx.run(
                f"MATCH (n:GRNode {{group: $g}}) WHERE n.{_vec_prop(space, int(old))} IS NOT NULL "
                "RETURN count(n) AS c",
                g=group,
            ).single()
            if left and left["c"]:
                raise StoreError(
                    f"space {space!r} of group {group!r} holds {old}-d vectors; got {dim}-d "
                    "(re-index the group to change the embedder)"
                )
        tx.run("MATCH (m:GRMeta {group: $g}) SET m[$key] = $dim", g=group, key=key, dim=dim).consume()

    def _delete_doc(self, tx: ManagedTransaction, group: str, doc_id: str) -> int:
        # Edges the document owns, whatever they touch (one index seek per allowed type).
        tx.run(self._delete_owned_edges, g=group, d=doc_id).consume()
        rec = tx.run(
            "MATCH (n:GRNode {group: $g, doc_id: $d}) DETACH DELETE n RETURN count(*) AS c", g=group, d=doc_id
        ).single()
        return int(rec["c"]) if rec else 0

    def delete_document(self, group: str, doc_id: str) -> int:
        def work(tx: ManagedTransaction) -> int:
            removed = self._delete_doc(tx, group, doc_id)
            self._bump(tx, group)
            return removed

        return self._write_tx("delete_document", work)

    def delete_derived(
        self,
        group: str,
        *,
        labels: Collection[str] = (),
        edge_types: Collection[str] = (),
        edge_src_label: str | None = None,
    ) -> None:
        label_list = [str(x) for x in labels]
        type_list = [str(t) for t in edge_types]

        def work(tx: ManagedTransaction) -> None:
            if label_list:
                tx.run(
                    "MATCH (n:GRNode {group: $g}) WHERE n.label IN $labels DETACH DELETE n",
                    g=group,
                    labels=label_list,
                ).consume()
            if type_list:
                tx.run(
                    "MATCH (a:GRNode {group: $g})-[r]->() WHERE type(r) IN $types "
                    "AND ($src IS NULL OR a.label = $src) DELETE r",
                    g=group,
                    types=type_list,
                    src=None if edge_src_label is None else str(edge_src_label),
                ).consume()
            self._bump(tx, group)

        self._write_tx("delete_derived", work)

    def delete_group(self, group: str) -> None:
        # In batches: one huge transaction would need the whole group in server memory.
        def batch(tx: ManagedTransaction) -> int:
            rec = tx.run(
                "MATCH (n:GRNode {group: $g}) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*) AS c", g=group
            ).single()
            return int(rec["c"]) if rec else 0

        while self._write_tx("delete_group", batch):
            pass

        def work(tx: ManagedTransaction) -> None:
            tx.run("MATCH (e:GRMetaEntry {group: $g}) DELETE e", g=group).consume()
            tx.run(
                "MATCH (m:GRMeta {group: $g}) WITH m, [k IN keys(m) WHERE k STARTS WITH 'dim_'] AS ks "
                f"FOREACH (k IN ks | SET m[k] = null) SET m.{SENTENCE_TEXT_FLAG} = true, m.{NAMES_FLAG} = true",
                g=group,
            ).consume()
            # the node stays (its version keeps rising if the group is written again); marked,
            # so another group is still counted as alone on the server (count_texts)
            self._bump(tx, group, deleted=True)

        self._write_tx("delete_group", work)

    def upgrade_group(self, group: str) -> list[str]:
        # A group written before an index existed: write what the index reads on its nodes
        # (read in id order, a batch at a time), then set the flag the queries check.
        flags = self._flags(group)
        if flags is None:
            return []
        done: list[str] = []
        if not flags.get(SENTENCE_TEXT_FLAG):
            n = self._backfill(group, [Label.SENTENCE], SENTENCE_TEXT_FLAG, "SET n.p_sentence = r.t",
                               lambda label, _id, props: {"t": _indexed_text(label, props)})
            done.append(f"indexed the text of {n[Label.SENTENCE]:,} sentences in {TEXT_INDEXES[str(Label.SENTENCE)][1]}")
        if not flags.get(NAMES_FLAG):
            n = self._backfill(
                group, [Label.ENTITY, Label.SECTION], NAMES_FLAG,
                "SET n.p_ename = r.ename, n.p_ekeys = r.ekeys, n.p_mentions = r.mentions, n.p_twords = r.twords",
                _name_columns,
            )
            done.append(f"indexed the names of {n[Label.ENTITY]:,} entities in {NAME_INDEX} "
                        f"and the titles of {n[Label.SECTION]:,} sections in {TITLE_INDEX}")
        return done

    def _flags(self, group: str) -> dict[str, Any] | None:
        """The group's index flags (SENTENCE_TEXT_FLAG, NAMES_FLAG); None without a meta node."""
        rows = self._query(
            "index flags", f"MATCH (m:GRMeta {{group: $g}}) RETURN m.{SENTENCE_TEXT_FLAG} AS s, m.{NAMES_FLAG} AS n", g=group
        )
        return {SENTENCE_TEXT_FLAG: rows[0]["s"], NAMES_FLAG: rows[0]["n"]} if rows else None

    def _flag(self, group: str, flag: str) -> bool:
        return bool((self._flags(group) or {}).get(flag))

    def _backfill(
        self,
        group: str,
        labels: Sequence[str],
        flag: str,
        set_clause: str,
        columns: Callable[[str, str, Mapping[str, Any]], Mapping[str, Any]],
    ) -> dict[str, int]:
        """Write ``columns(label, id, props)`` (as ``r``, through ``set_clause``) on every node
        of ``labels``, UPGRADE_BATCH nodes a transaction, then set ``flag`` and bump the
        version; how many nodes of each label."""
        counts: dict[str, int] = {}
        for label in labels:
            after, counts[str(label)] = "", 0
            while True:
                # In the (group, id) index's own order, from the last batch's id on: each
                # batch reads on from where the last stopped (ordered by id alone, the
                # planner sorted the label's every node for every batch).
                rows = self._query(
                    "nodes to index",
                    "MATCH (n:GRNode {group: $g}) USING INDEX n:GRNode(group, id) WHERE n.id > $after "
                    "WITH n ORDER BY n.group, n.id WHERE n.label = $l "
                    "RETURN n.id AS id, n.props AS props LIMIT $n",
                    g=group, l=str(label), after=after, n=UPGRADE_BATCH,
                )
                if not rows:
                    break
                batch = [{"id": r["id"], **columns(str(label), r["id"], load_props(r["props"]))} for r in rows]

                def put(tx: ManagedTransaction, batch: list[dict[str, Any]] = batch) -> None:
                    tx.run(f"UNWIND $rows AS r MATCH (n:GRNode {{group: $g, id: r.id}}) {set_clause}",
                           rows=batch, g=group).consume()

                self._write_tx("index nodes", put)
                after, counts[str(label)] = str(rows[-1]["id"]), counts[str(label)] + len(rows)

        def flag_set(tx: ManagedTransaction) -> None:
            tx.run(f"MATCH (m:GRMeta {{group: $g}}) SET m.{flag} = true", g=group).consume()
            self._bump(tx, group)

        self._write_tx("index nodes", flag_set)
        return counts

    # ------------------------------------------------------------------ reads
    @staticmethod
    def _node(group: str, r: Any) -> Node:
        return Node(id=r["id"], label=r["label"], group=group, doc_id=r["doc_id"], props=load_props(r["props"]))

    _NODE_COLS = "n.id AS id, n.label AS label, n.doc_id AS doc_id, n.props AS props"
    _NODE_NAMES = ("id", "label", "doc_id", "props")
    _EDGE_COLS = "a.id AS src, type(r) AS type, b.id AS dst, r.doc_id AS doc_id, r.props AS props"

    @staticmethod
    def _edge(group: str, r: Any) -> Edge:
        return Edge(
            src=r["src"], type=r["type"], dst=r["dst"], group=group, doc_id=r["doc_id"], props=load_props(r["props"])
        )

    def get_nodes(self, group: str, ids: Sequence[str]) -> list[Node]:
        ids = list(ids)
        if not ids:
            return []
        rows = self._rows(
            "get_nodes",
            f"UNWIND $ids AS i MATCH (n:GRNode {{group: $g, id: i}}) USING INDEX n:GRNode(group, id) "
            f"RETURN {self._NODE_COLS}",
            self._NODE_NAMES,
            g=group,
            ids=list(dict.fromkeys(ids)),
        )
        found = {r["id"]: self._node(group, r) for r in rows}
        return [found[i] for i in ids if i in found]

    def iter_nodes(self, group: str, label: str | None = None, *, doc_id: str | None = None) -> Iterator[Node]:
        if doc_id is not None:
            where = "MATCH (n:GRNode {group: $g, doc_id: $d}) WHERE $l IS NULL OR n.label = $l"
        elif label is not None:
            where = "MATCH (n:GRNode {group: $g, label: $l})"
        else:
            where = "MATCH (n:GRNode {group: $g})"
        rows = self._query(
            "iter_nodes",
            f"{where} RETURN {self._NODE_COLS} ORDER BY id",
            g=group,
            l=None if label is None else str(label),
            d=doc_id,
        )
        return (self._node(group, r) for r in rows)

    def find_nodes(self, group: str, label: str, prop: str, values: Collection[Any]) -> list[Node]:
        wanted = list(values)
        if not wanted:
            return []
        if prop in INDEXED_PROPS and all(is_scalar(v) for v in wanted):
            # prop comes from the fixed INDEXED_PROPS tuple, never from the caller's text.
            rows = self._rows(
                "find_nodes",
                f"MATCH (n:GRNode {{group: $g, label: $l}}) WHERE n.p_{prop} IN $vals RETURN {self._NODE_COLS}",
                self._NODE_NAMES,
                g=group,
                l=str(label),
                vals=list(dict.fromkeys(wanted)),
            )
        else:
            rows = self._query(
                "find_nodes",
                f"MATCH (n:GRNode {{group: $g, label: $l}}) RETURN {self._NODE_COLS}",
                g=group,
                l=str(label),
            )
        # Python equality decides, as in the embedded store (1 == 1.0 == True).
        return nodes_equal_to((self._node(group, r) for r in rows), prop, wanted)

    def edges_of(
        self,
        group: str,
        ids: Collection[str],
        types: Collection[str] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        id_list = list(dict.fromkeys(ids))
        if not id_list or (types is not None and not types):
            return []
        type_list = None if types is None else [str(t) for t in types]
        pattern = {
            "out": "UNWIND $ids AS i MATCH (a:GRNode {group: $g, id: i})-[r]->(b) USING INDEX a:GRNode(group, id)",
            "in": "UNWIND $ids AS i MATCH (a)-[r]->(b:GRNode {group: $g, id: i}) USING INDEX b:GRNode(group, id)",
            "both": "UNWIND $ids AS i MATCH (x:GRNode {group: $g, id: i})-[r]-() USING INDEX x:GRNode(group, id) "
            "WITH DISTINCT r MATCH (a)-[r]->(b)",
        }[direction]
        rows = self._rows(
            "edges_of",
            f"{pattern} WHERE $types IS NULL OR type(r) IN $types "
            f"RETURN DISTINCT elementId(r) AS rid, {self._EDGE_COLS}",
            ("rid", "src", "type", "dst", "doc_id", "props"),
            g=group,
            ids=id_list,
            types=type_list,
        )
        return [self._edge(group, r) for r in rows]

    def _around(
        self,
        what: str,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        other_labels: Collection[str] | None,
        expand: Callable[[str], str],
        column: str,
        **params: Any,
    ) -> Iterator[dict[str, Any]]:
        """The records of one statement per batch of ``ids`` (``_FRONTIER_BATCH``: a walk's
        whole frontier is usually one): each asked node found by its (group, id) index as
        ``a``, then ``expand(rel)``, where ``rel`` is the typed relationship chain to expand
        along (the types are spliced, from the allow-list only: a type filter in WHERE would
        read every relationship of a hub; empty when no type is allowed) and ``$labels`` the
        other ends' labels (null: any). ``expand`` returns ``id``, ``label`` and ``column``."""
        id_list = list(dict.fromkeys(ids))
        rel = "|".join(f"`{t}`" for t in self._typed(types))
        labels = None if other_labels is None else [str(x) for x in other_labels]
        for chunk in _batches(id_list, _FRONTIER_BATCH):
            yield from self._rows(
                what,
                f"UNWIND $ids AS i MATCH (a:GRNode {{group: $g, id: i}}) USING INDEX a:GRNode(group, id) {expand(rel)}",
                ("id", "label", column),
                g=group,
                ids=list(chunk),
                labels=labels,
                **params,
            )

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
        # A node's rows come back as one list, so a hub costs one record, not one per edge.
        far_typed = None if far_types is None else self._typed(far_types)
        if far_typed is not None and first_docs is None and self._typed(types):
            return self._neighbours_and_far(group, ids, types, other_labels, far_typed)
        row = "[type(r), b.id, b.label, b.doc_id]"

        def expand(rel: str) -> str:
            if not rel:
                return "RETURN a.id AS id, a.label AS label, [] AS rows"
            if first_docs is None:
                return (
                    f"OPTIONAL MATCH (a)-[r:{rel}]-(b) WHERE b <> a AND ($labels IS NULL OR b.label IN $labels) "
                    "RETURN a.id AS id, a.label AS label, "
                    f"collect(CASE WHEN b IS NULL THEN null ELSE {row} END) AS rows"
                )
            return (
                "CALL (a) { "
                f"MATCH (a)-[r:{rel}]-(b) WHERE b <> a AND b.doc_id IS NOT NULL "
                "AND ($labels IS NULL OR b.label IN $labels) "
                f"WITH b.doc_id AS d, collect({row}) AS rs ORDER BY d LIMIT $first "
                "RETURN collect(rs) AS docs } "
                "RETURN a.id AS id, a.label AS label, reduce(acc = [], rs IN docs | acc + rs) AS rows"
            )

        out = Neighbourhood({})
        for r in self._around("neighbours", group, ids, types, other_labels, expand, "rows", first=first_docs):
            node = r["id"]
            out.labels[node] = r["label"]
            if not r["rows"]:
                continue
            types_, others, labels, docs = zip(*r["rows"], strict=True)  # rows to columns, in C
            out.add_columns(node, types_, others, labels, docs)
        if far_typed is None:
            return out
        # with first_docs (entity_chunks' reads, not a walk's) or no type allowed: looked up after
        return replace(out, far=self.type_degrees(group, list(dict.fromkeys(out.other)), far_typed))

    def _neighbours_and_far(
        self, group: str, ids: Sequence[str], types: Collection[str], other_labels: Collection[str] | None,
        far_typed: list[str],
    ) -> Neighbourhood:
        """:meth:`neighbours` with ``far_types``: in the same statement, the type degrees of each
        distinct far end once: a frontier's edges lead to few distinct nodes (route2_local at a
        million generated sentences: 45,633 rows to 1,446 nodes a question), so counting them
        per row would look each node's degrees up dozens of times."""
        rel = "|".join(f"`{t}`" for t in self._typed(types))
        labels = None if other_labels is None else [str(x) for x in other_labels]
        statement = (
            "UNWIND $ids AS i MATCH (a:GRNode {group: $g, id: i}) USING INDEX a:GRNode(group, id) "
            f"OPTIONAL MATCH (a)-[r:{rel}]-(b) WHERE b <> a AND ($labels IS NULL OR b.label IN $labels) "
            "WITH a, collect(CASE WHEN b IS NULL THEN null ELSE [type(r), b.id, b.label, b.doc_id] END) AS rows, "
            "collect(DISTINCT b) AS ends "
            "WITH collect([a.id, a.label, rows]) AS nodes, collect(ends) AS ends "
            "CALL (ends) { UNWIND ends AS e UNWIND e AS b WITH DISTINCT b "
            f"RETURN collect([b.id, b.label, {self._degree_list('b', far_typed)}]) AS far }} "
            "RETURN nodes, far"
        )
        out = Neighbourhood({})
        far: dict[str, tuple[str, list[int]]] = {}
        for chunk in _batches(list(dict.fromkeys(ids)), _FRONTIER_BATCH):
            for rec in self._query("neighbours", statement, g=group, ids=list(chunk), labels=labels):
                for node, label, rows in rec["nodes"]:
                    out.labels[node] = label
                    if rows:
                        types_, others, other_labels_, docs = zip(*rows, strict=True)  # rows to columns, in C
                        out.add_columns(node, types_, others, other_labels_, docs)
                far.update((x, (lb, counts)) for x, lb, counts in rec["far"])
        return replace(out, far=TypeDegrees.of(far_typed, far))

    def _typed(self, types: Collection[str]) -> list[str]:
        """``types`` the store allows, sorted: the order of :meth:`_degree_list`'s counts."""
        return sorted({str(t) for t in types} & self._edge_types)

    @staticmethod
    def _degree_list(node: str, typed: Sequence[str]) -> str:
        """A list of ``node``'s edges of each of ``typed``, in either direction. ``COUNT { (n)-[:T]-() }``
        with nothing on the other end is planned as a degree look-up (the node's relationship
        counts per type), so a hub costs what a leaf costs."""
        return "[" + ", ".join(f"COUNT {{ ({node})-[:`{t}`]-() }}" for t in typed) + "]"

    def neighbour_counts(
        self,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        *,
        other_labels: Collection[str] | None = None,
        limit: int | None = None,
    ) -> NeighbourCounts:
        # The expansion and the count run in the server: one short row per (node, type,
        # label) crosses the wire, however many edges a hub has; with ``limit``, the server
        # stops reading a node's edges there.
        cap = "" if limit is None else "WITH r, b LIMIT $limit "

        def expand(rel: str) -> str:
            count = (
                f"CALL (a) {{ MATCH (a)-[r:{rel}]-(b) WHERE b <> a AND ($labels IS NULL OR b.label IN $labels) "
                f"{cap}WITH type(r) AS t, b.label AS l, count(*) AS n RETURN collect([t, l, n]) AS counts }} "
                if rel
                else "WITH a, [] AS counts "
            )
            return f"{count}RETURN a.id AS id, a.label AS label, counts"

        out = NeighbourCounts({})
        for r in self._around("neighbour_counts", group, ids, types, other_labels, expand, "counts", limit=limit):
            out.labels[r["id"]] = r["label"]
            if r["counts"]:
                out.counts[r["id"]] = [(t, lb, int(n)) for t, lb, n in r["counts"]]
                if limit is not None and sum(int(n) for _, _, n in r["counts"]) >= limit:
                    out.capped.add(r["id"])
        return out

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
        # One call: the walk reads the edges where they are, instead of a store round trip
        # per frontier (neo4j-procedures/, installed in the server's plugins directory).
        if not self.pushes_in_database():
            return None
        config = {
            "damping": float(damping), "eps": float(eps), "drain": float(drain), "max_rows": int(max_rows),
            "types": self._typed(types), "weights": {k: float(v) for k, v in weights.items()},
        }
        if spread is not None:
            config["spread"] = dict(spread)
        rows = self._query(
            "push",
            "CALL graphroute.push($g, $seeds, $weights, $config) YIELD ids, labels, scores, stats "
            "RETURN ids, labels, scores, stats",
            g=group, seeds=[str(x) for x in seed_ids], weights=[float(w) for w in seed_weights], config=config,
        )
        r = rows[0]
        stats = dict(r["stats"])
        if stats.get("version") != PUSH_PROCEDURE_VERSION:
            # a jar from another graphroute may walk or report differently: push from the client
            self._push_procedure = False
            logging.getLogger(__name__).warning(
                "graphroute.push on this server is version %s, not %s: the ppr push runs from the client; "
                "install this graphroute's neo4j-procedures jar (docs/pages/scaling.md)",
                stats.get("version"), PUSH_PROCEDURE_VERSION,
            )
            return None
        return PushedScores(list(r["ids"]), list(r["labels"]), np.asarray(r["scores"], dtype=np.float64), stats)

    def pushes_in_database(self) -> bool:
        # whether the server has graphroute's procedures, asked once per store object
        if self._push_procedure is None:
            try:
                rows = self._query(
                    "procedures", "SHOW PROCEDURES YIELD name WHERE name = 'graphroute.push' RETURN count(*) AS n"
                )
            except StoreUnavailableError:
                raise
            except StoreError:  # a user who may not list procedures: the client push
                rows = []
            self._push_procedure = bool(rows and rows[0]["n"])
        return self._push_procedure

    def type_degrees(self, group: str, ids: Sequence[str], types: Collection[str]) -> TypeDegrees | None:
        typed = self._typed(types)
        counts = self._degree_list("a", typed)
        found = {
            r["id"]: (r["label"], r["counts"])
            for r in self._around(
                "type_degrees", group, ids, types, None, lambda _: f"RETURN a.id AS id, a.label AS label, {counts} AS counts", "counts",
            )
        }
        return TypeDegrees.of(typed, found)

    def type_totals(self, group: str, types: Collection[str], labels: Collection[str]) -> TypeDegrees | None:
        # each node of the labels found by the (group, label) index, its degrees looked up per
        # type (no edge read): ~1 microsecond a node and type, 3-4 s for a million sentences'
        # 558,000 entities, chunks and sections
        typed = self._typed(types)
        if not typed:
            return TypeDegrees.of([], {})
        sums = ", ".join(f"sum(COUNT {{ (a)-[:`{t}`]-() }})" for t in typed)
        rows = self._query(
            "type_totals",
            "UNWIND $labels AS l MATCH (a:GRNode {group: $g, label: l}) USING INDEX a:GRNode(group, label) "
            f"RETURN l AS label, [{sums}] AS counts",
            g=group, labels=[str(lb) for lb in labels],
        )
        return TypeDegrees.of(typed, {str(r["label"]): (str(r["label"]), r["counts"]) for r in rows})

    def iter_edges(self, group: str, types: Collection[str] | None = None) -> Iterator[Edge]:
        if types is not None and not types:
            return iter(())
        rows = self._query(
            "iter_edges",
            f"MATCH (a:GRNode {{group: $g}})-[r]->(b) WHERE $types IS NULL OR type(r) IN $types "
            f"RETURN {self._EDGE_COLS}",
            g=group,
            types=None if types is None else [str(t) for t in types],
        )
        return (self._edge(group, r) for r in rows)

    # ------------------------------------------------------------------ vectors
    def _exact(
        self, group: str, prop: str, q: list[float], k: int, restrict_to: list[str] | None
    ) -> list[tuple[str, float]]:
        if restrict_to is not None:
            match = (
                f"UNWIND $ids AS i MATCH (n:GRNode {{group: $g, id: i}}) USING INDEX n:GRNode(group, id) "
                f"WHERE n.{prop} IS NOT NULL"
            )
        else:
            match = f"MATCH (n:GRNode {{group: $g}}) WHERE n.{prop} IS NOT NULL"
        rows = self._rows(
            "vector search",
            f"{match} WITH n, vector.similarity.cosine(n.{prop}, $q) AS s "
            "RETURN n.id AS id, s ORDER BY s DESC, id LIMIT $k",
            ("id", "s"),
            g=group,
            q=q,
            k=k,
            ids=restrict_to,
        )
        return [(r["id"], 2.0 * float(r["s"]) - 1.0) for r in rows]

    def _count_vectors(self, group: str, prop: str) -> int:
        rows = self._query(
            "vector count",
            f"MATCH (n:GRNode {{group: $g}}) WHERE n.{prop} IS NOT NULL RETURN count(n) AS c",
            g=group,
        )
        return int(rows[0]["c"]) if rows else 0

    def _space_of(self, group: str, prop: str, dim: int) -> _HeldSpace:
        """How many vectors the group holds in ``prop`` and, when that is at most
        ``exact_max``, all of them as a matrix searched in the client (see
        :mod:`graphroute.core.lib.vector_matrix` for why): at most ``exact_max`` x ``dim``
        floats per space, whatever the corpus."""
        n = self._count_vectors(group, prop)
        if n > self.exact_max:
            return _HeldSpace(n)
        found = self._rows(
            "vector matrix",
            f"MATCH (n:GRNode {{group: $g}}) WHERE n.{prop} IS NOT NULL RETURN n.id AS id, n.{prop} AS v ORDER BY id",
            ("id", "v"),
            g=group,
        )
        matrix = np.asarray([r["v"] for r in found], dtype=np.float32).reshape(len(found), dim)
        return _HeldSpace(len(found), VectorMatrix.of([str(r["id"]) for r in found], matrix))

    def search_text(self, group: str, query: str, k: int, *, label: str = Label.CHUNK) -> list[tuple[str, float]] | None:
        if str(label) not in TEXT_INDEXES:
            return None
        if str(label) == Label.SENTENCE and not self._flag(group, SENTENCE_TEXT_FLAG):
            return None  # sentences written before their index existed: not all are in it
        terms = _LUCENE_TERM.findall(query)
        if k <= 0 or not terms:
            return []
        lucene = " ".join(terms)  # word characters only: no Lucene syntax reaches the parser
        hits = self._fulltext(TEXT_INDEXES[str(label)][1], lucene, group, k)
        # equal scores by id, so a tie at the k-th place does not depend on the index's order
        return [(i, sc) for i, sc, _ in sorted(hits, key=lambda h: (-h[1], h[0]))[:k]]

    def _text_fetch(self, index: str, group: str, k: int) -> int:
        """How many hits to ask a full-text index for, to keep ``k`` of the group's. The
        index holds every group's nodes, so: k over the group's share of the hits its last
        answer held, with half again for room; ``oversample`` x k before any answer, and
        never more. A group alone on its server asks for 1.5 k, not 10 k; a fetch that falls
        short is asked again for more (``_fulltext``, ``match_texts``)."""
        share = self._text_shares.get((index, group))
        factor = self.oversample if share is None else min(self.oversample, 1.5 / max(share, 1e-6))
        return max(k, math.ceil(k * max(factor, 1.0)))

    def _saw_text(self, index: str, group: str, mine: int, seen: int) -> None:
        """Record the group's share of the hits a full-text query returned."""
        if seen > 0:
            self._text_shares[(index, group)] = mine / seen

    def _fulltext(self, index: str, lucene: str, group: str, k: int, *, texts: bool = False) -> list[tuple[str, float, str]]:
        """(id, score, indexed text or "") of the group's hits of a Lucene query, at least
        ``k`` of them when there are (all that one fetch returned), in the index's order. The
        index holds every group's nodes: ask for more hits than k and keep the group's, more
        again while the group's are crowded out (as vector_search does)."""
        fetch = self._text_fetch(index, group, k)
        text = "node.p_" + next(c for c, i in TEXT_INDEXES.values() if i == index) if texts else "''"
        while True:
            rows = self._query(
                "full-text search",
                f"CALL db.index.fulltext.queryNodes('{index}', $q, {{limit: $fetch}}) YIELD node, score "
                f"WITH collect(CASE WHEN node.group = $g THEN [node.id, score, {text}] END) AS mine, count(*) AS seen "
                "RETURN mine, seen",
                q=lucene,
                fetch=fetch,
                g=group,
            )
            mine = [(str(i), float(sc), str(t or "")) for i, sc, t in rows[0]["mine"]] if rows else []
            seen = int(rows[0]["seen"]) if rows else 0
            self._saw_text(index, group, len(mine), seen)
            if len(mine) >= k or seen < fetch:  # enough, or the index has no more matches
                return mine
            fetch *= 8

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
        out = self.match_texts(group, [TextMatch(tuple(map(tuple, clauses)), limit, fuzzy, tuple(near))], label=label)
        return None if out is None else out[0]

    @staticmethod
    def _match_query(m: TextMatch) -> str:
        """The Lucene query of a look-up ("" when it can match nothing): every clause
        required, ``near``'s words standing close ranked first."""
        required = [q for q in (_lucene_any(c, m.fuzzy) for c in m.clauses) if q]
        if m.limit <= 0 or not required:
            return ""
        lucene = " ".join(f"+{q}" for q in required)
        words = [t for w in m.near for t in _LUCENE_WORD.findall(w)]
        if len(words) > 1:  # optional: ranks the texts where the words stand close first
            lucene += f' "{" ".join(words)}"~{NEAR_SLOP}^4'
        return lucene

    def match_texts(
        self, group: str, lookups: Sequence[TextMatch], *, label: str = Label.CHUNK
    ) -> list[list[str]] | None:
        if str(label) not in TEXT_INDEXES or str(label) == Label.SENTENCE:
            return None  # chunks only: every group's chunks are in gr_text
        column, index = TEXT_INDEXES[str(label)]
        out: list[list[str]] = [[] for _ in lookups]
        asked: list[dict[str, Any]] = [{"i": i, "q": q, "fetch": self._text_fetch(index, group, m.limit), "limit": m.limit}
                                       for i, m in enumerate(lookups) if (q := self._match_query(m))]
        if not asked:
            return out
        # one statement for all the look-ups; a look-up whose group's hits were crowded out
        # by other groups' is asked again on its own (``_fulltext`` fetches more)
        rows = self._query(
            "full-text search",
            f"UNWIND $asked AS a CALL (a) {{ CALL db.index.fulltext.queryNodes('{index}', a.q, {{limit: a.fetch}}) "
            "YIELD node WITH collect(CASE WHEN node.group = $g THEN node END) AS mine, count(*) AS seen "
            f"RETURN [n IN mine[..a.limit] | n.p_{column}] AS mine, size(mine) AS kept, seen }} RETURN a.i AS i, mine, kept, seen",
            asked=asked, g=group,
        )
        by_i = {int(r["i"]): r for r in rows}
        for r in rows:
            self._saw_text(index, group, int(r["kept"]), int(r["seen"]))
        for a in asked:
            i, lucene, fetch = int(a["i"]), str(a["q"]), int(a["fetch"])
            m, r = lookups[i], by_i.get(i)
            mine = [str(t or "") for t in r["mine"]] if r else []
            if len(mine) < m.limit and r is not None and int(r["seen"]) >= fetch:
                mine = [t for _, _, t in self._fulltext(index, lucene, group, m.limit, texts=True)]
            out[i] = mine[: m.limit]
        return out

    def entity_candidates(self, group: str, name: str, *, fuzzy: int = 0, outer: int = 0) -> list[Node] | None:
        norm = normalize_name(name)
        toks = norm.split(" ") if norm else []
        runs = list(dict.fromkeys(" ".join(toks[a:b]) for a in range(len(toks)) for b in range(a + 1, len(toks) + 1)))
        keys = [_name_key("a", norm)] + [_name_key("v", v) for v in [variant_key(norm)] if v]
        node = "RETURN n {.id, .label, .doc_id, .props} AS n"
        # the group's flag and the whole-key look-ups in one round trip
        first = self._query(
            "entity names",
            f"OPTIONAL MATCH (m:GRMeta {{group: $g}}) RETURN coalesce(m.{NAMES_FLAG}, false) AS ready, COLLECT {{ "
            f"MATCH (n:GRNode {{group: $g, label: $l, p_name: $name}}) {node} "
            f"UNION UNWIND $runs AS r MATCH (n:GRNode {{group: $g, label: $l, p_norm: r}}) {node} "
            "UNION UNWIND $ids AS i MATCH (n:GRNode {group: $g, id: i}) USING INDEX n:GRNode(group, id) "
            f"WHERE n.label = $l {node} "
            f"UNION CALL db.index.fulltext.queryNodes('{NAME_INDEX}', $keys) YIELD node AS n "
            f"WITH n WHERE n.group = $g AND n.label = $l {node} }} AS nodes",
            g=group, l=str(Label.ENTITY), name=name, runs=runs, ids=[ENTITY_ID_PREFIX + r for r in runs],
            keys="p_ekeys:(" + " ".join(keys) + ")",
        )
        if not first or not first[0]["ready"]:
            return None  # entities written before the name index existed: not all are in it
        if not norm:
            return []
        found = {str(r["id"]): self._node(group, r) for r in first[0]["nodes"]}
        words = [_lucene_escaped(t) for t in toks]
        if outer > 0:  # the names holding the whole name as a phrase, ranked as the cascade picks one
            rows = self._query(
                "entity names",
                f"CALL db.index.fulltext.queryNodes('{NAME_INDEX}', $q, {{limit: $scan}}) YIELD node AS n "
                "WITH n WHERE n.group = $g AND n.label = $l "
                f"WITH n ORDER BY coalesce(n.p_mentions, 0) DESC, size(n.p_ename), n.p_ename DESC LIMIT $k {node}",
                q='p_ename:"' + " ".join(words) + '"', scan=NAME_SCAN, g=group, l=str(Label.ENTITY), k=outer,
            )
            found.update((str(r["n"]["id"]), self._node(group, r["n"])) for r in rows)
        if fuzzy > 0:  # each word, or a word an edit away (two from six letters), as _lucene_any spells them
            terms = [f"{w}~{1 if len(t) < 6 else 2}" if len(t) > 2 else w for w, t in zip(words, toks, strict=True)]
            hits = self._fulltext(NAME_INDEX, "p_ename:(" + " ".join(terms) + ")", group, fuzzy)[:fuzzy]
            found.update((n.id, n) for n in self.get_nodes(group, [i for i, _, _ in hits if i not in found]))
        return [found[i] for i in sorted(found)]

    def sections_by_title(self, group: str, words: Sequence[str], k: int) -> list[tuple[str, int]] | None:
        if not self._flag(group, NAMES_FLAG):
            return None
        wanted = list(dict.fromkeys(w for w in words if w))
        if k <= 0 or not wanted:
            return []
        rows = self._query(
            "section titles",
            f"CALL db.index.fulltext.queryNodes('{TITLE_INDEX}', $q, {{limit: $scan}}) YIELD node "
            "WITH node WHERE node.group = $g AND node.label = $l "
            "WITH node.id AS id, size([w IN $words WHERE (' ' + node.p_twords + ' ') CONTAINS (' ' + w + ' ')]) AS hits "
            "WHERE hits > 0 RETURN id, hits ORDER BY hits DESC, id LIMIT $k",
            q="p_twords:(" + " ".join(_lucene_escaped(w) for w in wanted) + ")", scan=NAME_SCAN,
            g=group, l=str(Label.SECTION), words=wanted, k=k,
        )
        return [(str(r["id"]), int(r["hits"])) for r in rows]

    def count_text(self, group: str, word: str, *, label: str = Label.CHUNK) -> int | None:
        out = self.count_texts(group, [word], label=label)
        return None if out is None else out[0]

    def count_texts(self, group: str, words: Sequence[str], *, label: str = Label.CHUNK) -> list[int] | None:
        if str(label) not in TEXT_INDEXES or str(label) == Label.SENTENCE:
            return None
        asked = [{"i": i, "q": q} for i, w in enumerate(words) if (q := _lucene_any([w], False))]
        out = [0] * len(words)
        if not asked:
            return out
        # A group alone on its server counts every hit without reading each one's group
        # (half the time of a count at a million sentences); a deleted group's GRMeta is
        # marked, and does not count.
        rows = self._query(
            "full-text count",
            f"OPTIONAL MATCH (m:GRMeta) WHERE m.{DELETED_FLAG} IS NULL WITH collect(m.group) = [$g] AS alone "
            f"UNWIND $asked AS a CALL (a, alone) {{ CALL db.index.fulltext.queryNodes('{TEXT_INDEXES[str(label)][1]}', a.q) "
            "YIELD node WHERE alone OR node.group = $g RETURN count(node) AS c } RETURN a.i AS i, c",
            asked=asked, g=group,
        )
        for r in rows:
            out[int(r["i"])] = int(r["c"])
        return out

    def vector_search(
        self,
        group: str,
        space: str,
        vector: np.ndarray,
        k: int,
        *,
        restrict_to: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        name = _space_name(space)
        dim = self._read_dims(group).get(name)
        if dim is None:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != dim:
            raise StoreError(
                f"query vector has {q.shape[0]} dimensions; space {name!r} of group {group!r} holds {dim}"
            )
        norm = float(np.linalg.norm(q))
        unit = q / norm if norm > 0 else q
        qv = _Vector(unit.tolist())
        prop = _vec_prop(name, dim)
        # read once per store version: the count reads every node of the group
        held = per_version(self, group, ("vector_space", prop), lambda: self._space_of(group, prop, dim))
        if held.matrix is not None:
            self.last_search_path = "exact"
            return held.matrix.search(unit, k, restrict_to)
        if restrict_to is not None:
            ids = list(dict.fromkeys(restrict_to))
            self.last_search_path = "exact"
            return self._exact(group, prop, qv, k, ids) if ids else []
        if held.count <= k:
            self.last_search_path = "exact"
            return self._exact(group, prop, qv, k, None)
        # The stages of one question search a space with the same vector (Route 5's passage
        # seeds, 1,000 hits, then its vector anchors, 10): the first k of a longer search
        # answer a shorter one, from the larger candidate list.
        key = unit.tobytes()
        last = held.last
        if last is not None and last[0] == key and len(last[1]) >= k:
            self.last_search_path = "index"
            return list(last[1][:k])
        hits = self._index_search(group, prop, qv, k)
        if self.last_search_path == "index":
            held.last = (key, tuple(hits))
        return hits

    def _index_search(self, group: str, prop: str, qv: list[float], k: int) -> list[tuple[str, float]]:
        """The group's k best hits from the space's vector index: more candidates than k
        are asked for and the group's kept, more again while other groups crowd them out, and
        an exact scan when the index cannot answer."""
        from neo4j.exceptions import ClientError

        fetch = k * max(self.oversample, 1)
        # queryNodes yields its neighbours best first (Lucene's top hits), so the group's
        # first k are its k best: no ORDER BY over every candidate, which would read the id of
        # each (10,000 for Route 5's 1,000 passage seeds: 11 ms at a million sentences). A
        # yield order that ever came back unsorted is answered by the sorting statement.
        for _ in range(3):
            try:
                rows = self._vector_rows(_BEST_FIRST, prop, qv, group, fetch, k)
                scores = [float(r["score"]) for r in rows]
                if any(a < b for a, b in itertools.pairwise(scores)):
                    rows = self._vector_rows(_SORTED, prop, qv, group, fetch, k)
            except StoreError as exc:
                if isinstance(exc.__cause__, ClientError):  # index missing or not online yet
                    break
                raise
            if len(rows) >= k:
                self.last_search_path = "index"
                rows.sort(key=lambda r: (-float(r["score"]), str(r["id"])))  # equal scores by id
                return [(r["id"], 2.0 * float(r["score"]) - 1.0) for r in rows]
            fetch *= 8
        self.last_search_path = "index+exact"
        return self._exact(group, prop, qv, k, None)

    def _vector_rows(self, pick: str, prop: str, qv: list[float], group: str, fetch: int, k: int) -> list[dict[str, Any]]:
        """The group's hits among ``fetch`` candidates of the space's vector index, ``pick``
        choosing k of them."""
        return self._rows(
            "vector index search",
            "CALL db.index.vector.queryNodes($index, $fetch, $q) YIELD node, score WITH node, score "
            f"WHERE node.group = $g {pick} RETURN node.id AS id, score",
            ("id", "score"),
            index=f"gr_{prop}", fetch=fetch, q=qv, g=group, k=k,
        )

    def get_vectors(self, group: str, space: str, ids: Sequence[str]) -> np.ndarray:
        name = _space_name(space)
        dim = self._read_dims(group).get(name, 0)
        out = np.zeros((len(ids), dim), dtype=np.float32)
        if not dim or not ids:
            return out
        prop = _vec_prop(name, dim)
        rows = self._rows(
            "get_vectors",
            f"UNWIND $ids AS i MATCH (n:GRNode {{group: $g, id: i}}) USING INDEX n:GRNode(group, id) "
            f"WHERE n.{prop} IS NOT NULL "
            f"RETURN n.id AS id, n.{prop} AS v",
            ("id", "v"),
            g=group,
            ids=list(dict.fromkeys(ids)),
        )
        found = {r["id"]: r["v"] for r in rows}
        for row, i in enumerate(ids):
            if i in found:
                out[row] = np.asarray(found[i], dtype=np.float32)
        return out

    def all_vectors(self, group: str, space: str) -> tuple[list[str], np.ndarray]:
        name = _space_name(space)
        dim = self._dims(group).get(name, 0)
        if not dim:
            return [], np.zeros((0, 0), dtype=np.float32)
        prop = _vec_prop(name, dim)
        rows = self._query(
            "all_vectors",
            f"MATCH (n:GRNode {{group: $g}}) WHERE n.{prop} IS NOT NULL RETURN n.id AS id, n.{prop} AS v ORDER BY id",
            g=group,
        )
        if not rows:
            return [], np.zeros((0, dim), dtype=np.float32)
        return [r["id"] for r in rows], np.asarray([r["v"] for r in rows], dtype=np.float32)

    def count_nodes(self, group: str, label: str) -> int:
        rows = self._query("count_nodes", "MATCH (n:GRNode {group: $g, label: $l}) RETURN count(n) AS c", g=group, l=str(label))
        return int(rows[0]["c"]) if rows else 0

    def document_page(self, group: str, limit: int | None, offset: int = 0) -> list[Node]:
        # toLower stands in for title_key's casefold: the two differ only for a few letters
        # (German sharp s, say), which then sort a little apart on the two backends
        rows = self._rows(
            "document_page",
            f"MATCH (n:GRNode {{group: $g, label: $l}}) WITH n ORDER BY toLower(coalesce(toString(n.p_title), '')), n.id "
            f"SKIP $skip {'' if limit is None else 'LIMIT $limit '}RETURN {self._NODE_COLS}",
            self._NODE_NAMES,
            g=group,
            l=Label.DOCUMENT.value,
            skip=offset,
            limit=limit,
        )
        return [self._node(group, r) for r in rows]

    def counts(self, group: str) -> dict[str, dict[str, int]]:
        nodes = self._query(
            "counts", "MATCH (n:GRNode {group: $g}) RETURN n.label AS l, count(*) AS c", g=group
        )
        edges = self._query(
            "counts", "MATCH (:GRNode {group: $g})-[r]->() RETURN type(r) AS t, count(*) AS c", g=group
        )
        vecs: dict[str, int] = {}
        for space, dim in self._dims(group).items():
            c = self._count_vectors(group, _vec_prop(space, dim))
            if c:
                vecs[space] = c
        return {
            "nodes": {r["l"]: int(r["c"]) for r in nodes},
            "edges": {r["t"]: int(r["c"]) for r in edges},
            "vectors": vecs,
        }


class Neo4jBackend(StoreBackend):
    """Neo4j store: a Neo4j server (5.26 or 2025+) over Bolt (neo4j://, bolt://), official driver."""

    name = "neo4j"

    class Params(ComponentParams):
        database: str | None = Field(None, description="Database name; None uses the server's default.")
        exact_max: int = Field(
            2_000, ge=0, le=10_000_000,
            description=(
                "Groups with at most this many vectors in a space are searched exactly, in the client: the "
                "space is read once per store version and held (exact_max x dimensions floats per space)."
            ),
        )
        oversample: int = Field(
            10, ge=1, le=1000, description="Index candidates fetched per requested hit in large groups."
        )
        retry_s: float = Field(
            30.0, ge=0.0, le=600.0, description="How long transient errors of writes are retried (with backoff)."
        )
        read_retry_s: float = Field(
            1.0, ge=0.0, le=600.0,
            description="How long transient errors of reads are retried (the driver's backoff adds its next "
            "delay, 1-2 s): an unreachable server is reported within a few seconds (queries, health checks).",
        )
        connect_attempts: int = Field(3, ge=1, le=20, description="Connection attempts before giving up.")
        write_concurrency: int = Field(
            2, ge=1, le=16,
            description="Write transactions of disjoint document batches kept in flight while indexing "
            "(each still atomic), so the server commits on more than one core.",
        )
        extra_edge_types: list[str] = Field(
            default_factory=list, description="Edge types allowed besides the built-in EdgeType names."
        )
        vector_quantization: bool = Field(
            False,
            description="Quantize the vectors in the server's vector indexes (less index memory, an "
            "approximate first pass) when the store creates them; off, the index holds the floats.",
        )

    params: Params

    @classmethod
    def handles(cls, location: str) -> bool:
        return location.lower().startswith(SCHEMES)

    def open(self, location: str, **options: Any) -> GraphStore:
        settings = options.pop("settings", None)
        user = options.pop("user", None) or getattr(settings, "neo4j_user", None) or "neo4j"
        password = options.pop("password", None) or getattr(settings, "neo4j_password", None) or ""
        if not password and _is_loopback(location):
            password = NEO4J_DEV_PASSWORD  # the documented dev server's (constants.NEO4J_DEV_PASSWORD)
        params = self.Params(**{**self.params.model_dump(), **options}) if options else self.params
        try:
            import neo4j  # noqa: F401
        except ImportError as exc:  # pragma: no cover - the extra is installed in dev
            raise StoreError("the neo4j store needs the `neo4j` package: pip install 'graphroute[neo4j]'") from exc
        return Neo4jStore(
            location,
            user,
            password,
            database=params.database,
            exact_max=params.exact_max,
            oversample=params.oversample,
            retry_s=params.retry_s,
            read_retry_s=params.read_retry_s,
            connect_attempts=params.connect_attempts,
            extra_edge_types=params.extra_edge_types,
            write_concurrency=params.write_concurrency,
            vector_quantization=params.vector_quantization,
        )


@hookimpl
def register_stores() -> list[type[StoreBackend]]:
    return [Neo4jBackend]
