"""Index profiles and the context index steps run in.

An **index profile** is to indexing what a route is to querying: a YAML file (shipped ones
live in ``routes/index/``) naming the segmenter, the embedder, parsing limits and the
ordered index steps with their parameters. The profile a group was indexed with is stored
in the group's metadata, so queries embed with the same model.

The pipeline that loads, parses, embeds and writes documents, then runs the steps, is
:class:`Indexer` (``graphroute index``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from graphroute.core.api.components import Embedder, IndexContext, LLMClient
from graphroute.core.api.constants import DOCUMENTS_META, FINGERPRINT_META
from graphroute.core.api.store import DocumentBatch, GraphStore, MetaPatch, merge_batches
from graphroute.core.config.index_profile import IndexProfile, check_profile, load_index_profile
from graphroute.core.config.settings import Settings
from graphroute.core.errors import (
    EXIT_FILES_FAILED,
    EXIT_INTERNAL,
    LoaderError,
    ProfileMismatchError,
    StoreLocationError,
)
from graphroute.core.index.files import collect_files, fingerprint, is_gone
from graphroute.core.index.skeleton import DocumentSkeleton
from graphroute.core.lib.knn import normalise_in_place
from graphroute.core.lib.model_loads import LoadWatch, watch_model_loads
from graphroute.core.lib.phases import enter_phase, release_free_memory
from graphroute.core.registry import Registry

# =========================================================================== the pipeline

# The parts of an index profile that decide how documents are read, split and embedded:
# the parse fingerprint hashes them, and a run that changes one re-parses every document
PARSE_PARTS = ("segmenter", "embedder", "parse", "loaders")
DOC_BATCH = 64  # documents parsed together; their new ones are one DocumentBatch
# Sentences and chunks of consecutive batches are gathered until this many texts, then
# embedded in one call and written in one ``write_batches`` call (the crash-recovery unit:
# one transaction on the embedded store). The local embedder sorts a call's texts by
# length before it batches them, so a wide call pads each forward pass to similar lengths;
# a 64-document call pads short sentences to the batch's longest chunk (measured: ten
# 64-text calls over 640 MuSiQue chunks 53-58 CPU s, one call over the same texts 30 CPU
# s). The window bounds memory (a few MB of vectors plus the window's skeletons), never
# the whole corpus.
EMBED_WINDOW_TEXTS = 4096

T = TypeVar("T")


def embed_text_count(skels: Sequence[DocumentSkeleton]) -> int:
    """The texts a batch's skeletons give the embedder: its sentences and chunks."""
    return sum(len(sk.sentence_embed_texts) + len(sk.chunk_embed_texts) for sk in skels)


def embed_windows(batches: Iterable[T], texts: Callable[[T], int]) -> Iterator[list[T]]:
    """Consecutive batches gathered until they hold ``EMBED_WINDOW_TEXTS`` texts (the last
    window holds the rest): the indexer's unit for one embedding call and one
    ``write_batches`` call. graphroute perf's write part writes in the same windows."""
    window: list[T] = []
    held = 0
    for batch in batches:
        window.append(batch)
        held += texts(batch)
        if held >= EMBED_WINDOW_TEXTS:
            yield window
            window, held = [], 0
    if window:
        yield window

# Phase observers: called with a phase name ("load", "parse", "embed", "write",
# "step:<name>", "done") as the indexer moves between phases, so a benchmark can attribute
# peak memory to the step that holds it (``graphroute.core.apps.perf.perf.PhaseSampler``). A step may
# announce finer phases of its own ("step:entity_graph:extract"). Empty in normal runs.

@dataclass
class IndexReport:
    """What one ``index_paths`` run did (``graphroute index --json``)."""

    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)  # files of a supported type that could not be read
    skipped: list[dict[str, str]] = field(default_factory=list)  # files of a type no loader reads, links to folders
    seconds: float = 0.0
    documents: int = 0  # documents in the group after the run
    sentences: int = 0  # sentences in the group after the run
    sentences_written: int = 0  # sentences (re)built in this run
    steps: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    upgrades: list[str] = field(default_factory=list)  # what the store did to a group an older graphroute wrote
    parse: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    embedding_cache: dict[str, int] = field(default_factory=dict)
    encodings: dict[str, str] = field(default_factory=dict)  # file -> its encoding, when not UTF-8
    models: dict[str, float] = field(default_factory=dict)  # seconds loading each model, apart from the timings

    def add_model_loads(self, watch: LoadWatch) -> None:
        """Count a phase's model loading on its own line (``timings.models``, ``models``)."""
        for load in watch.loads:
            self.models[load.name] = self.models.get(load.name, 0.0) + load.seconds
        if self.models:
            self.timings["models"] = sum(self.models.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": list(self.failed),
            "skipped": list(self.skipped),
            "seconds": round(self.seconds, 3),
            "documents": self.documents,
            "sentences": self.sentences,
            "sentences_written": self.sentences_written,
            "sentences_per_second": round(self.sentences_written / self.seconds, 1) if self.seconds > 0 else 0.0,
            "steps": self.steps,
            "warnings": list(self.warnings),
            "upgrades": list(self.upgrades),
            "parse": dict(self.parse),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "embedding_cache": dict(self.embedding_cache),
            "encodings": dict(self.encodings),
            "models": {k: round(v, 3) for k, v in self.models.items()},
        }


def nothing_indexed(report: Mapping[str, Any]) -> bool:
    """True when files of a supported type failed and none could be read (none indexed, none
    unchanged): a run that did none of what it was asked. ``report`` is
    :meth:`IndexReport.to_json`."""
    return bool(report.get("failed")) and not report.get("indexed", 0) + report.get("unchanged", 0)


def failed_steps(report: Mapping[str, Any]) -> list[str]:
    """The index steps that raised in the run of ``report`` (:meth:`IndexReport.to_json`):
    the documents are written, those steps' layers are not."""
    return [name for name, s in (report.get("steps") or {}).items() if isinstance(s, dict) and "error" in s]


def index_exit_code(report: Mapping[str, Any]) -> int:
    """``graphroute index``'s exit code for a run's report: 0 when every file of a supported
    type was read (unsupported ones are only skipped), ``EXIT_FILES_FAILED`` when some could
    not be read and the rest were indexed, and ``EXIT_INTERNAL`` when :func:`nothing_indexed`
    or an index step failed (:func:`failed_steps`; an HTTP index job ends ``failed`` then)."""
    if failed_steps(report):
        return EXIT_INTERNAL
    if not report.get("failed"):
        return 0
    return EXIT_INTERNAL if nothing_indexed(report) else EXIT_FILES_FAILED


class Indexer:
    """Load, parse, embed and write documents into a group, then run the profile's steps.

    Incremental: the group's ``documents`` meta records each document's content hash, so an
    unchanged document is skipped, a changed one is replaced in one atomic write
    (``replace_doc``) and, with ``remove_missing``, a document whose file is gone is deleted.
    A file of a supported type that cannot be read is reported in ``failed``, a file of a type
    no loader reads in ``skipped``; the run goes on with the others and nothing already
    indexed is lost.
    """

    def __init__(
        self,
        store: GraphStore,
        group: str,
        *,
        registry: Registry,
        settings: Settings,
        profile: str | IndexProfile | None = None,
    ) -> None:
        self.store = store
        self.group = group
        self.registry = registry
        self.settings = settings
        self.profile = profile if isinstance(profile, IndexProfile) else load_index_profile(profile)
        self._embedder: Embedder | None = None
        self._segmenter: Any = None

    # ------------------------------------------------------------------ components
    def embedder(self) -> Embedder:
        """The profile's embedder behind the on-disk embedding cache."""
        if self._embedder is None:
            from graphroute.core.lib.embed_cache import CachingEmbedder, EmbeddingCache

            spec = self.profile.embedder
            cls = self.registry.embedders.get(spec.use)
            inner = cls(cls.Params(**spec.with_))
            try:
                cache: EmbeddingCache | None = EmbeddingCache(Path(self.settings.cache_dir))
            except (OSError, sqlite3.Error):  # an unwritable cache dir costs speed, not correctness
                cache = None
            self._embedder = CachingEmbedder(inner, cache)
        return self._embedder

    def segmenter(self) -> Any:
        if self._segmenter is None:
            spec = self.profile.segmenter
            cls = self.registry.segmenters.get(spec.use)
            self._segmenter = cls(cls.Params(**spec.with_))
        return self._segmenter

    def _loaders(self) -> list[Any]:
        """The profile's ``loaders`` first (in order, with their parameters), then every other
        registered loader that runs by default; a file goes to the first that accepts it."""
        loaders = []
        named: set[str] = set()
        specs = [(spec.use, spec.with_, spec.enabled) for spec in self.profile.loaders]
        specs += [(name, {}, True) for name, e in self.registry.loaders.entries.items() if e.cls.by_default]
        for name, with_, enabled in specs:
            if name in named:
                continue
            named.add(name)
            if not enabled:
                continue
            cls = self.registry.loaders.get(name)
            kwargs = {"max_file_mb": self.profile.parse.max_file_mb} if "max_file_mb" in cls.Params.model_fields else {}
            loaders.append(cls(cls.Params(**{**kwargs, **with_})))
        return loaders

    def _limits(self) -> Any:
        from graphroute.core.index.skeleton import ParseLimits

        return ParseLimits.of(self.profile.parse)

    def fingerprints(self) -> tuple[str, str]:
        """Hashes of what makes the group's documents (segmenter, embedder and how it reads
        documents, parse settings, loaders) and of its index steps: a run whose hashes differ
        from the group's re-parses every document, or rebuilds the steps' layers."""
        profile_json = self.profile.model_dump(by_alias=True, mode="json")
        segmenter, embedder, parse, loaders = (profile_json[k] for k in PARSE_PARTS)
        parse_fp = fingerprint([segmenter, embedder, parse, self.embedder().document_id] + ([loaders] if loaders else []))
        return parse_fp, fingerprint(self._steps_key(profile_json["steps"]))

    def is_current(self) -> bool:
        """True when the group was last indexed, to the end, with this profile and embedder."""
        old = self.store.get_meta(self.group, FINGERPRINT_META) or {}
        return not old.get("pending") and (old.get("parse"), old.get("steps")) == self.fingerprints()

    # ------------------------------------------------------------------ the run
    def index_paths(
        self,
        paths: list[Path],
        remove_missing: bool = False,
        remove: Collection[str] = (),
        roots: list[Path] | None = None,
        action: str = "indexed into",
    ) -> IndexReport:
        """Index ``paths``; delete the documents whose ids are in ``remove`` (and, with
        ``remove_missing``, those whose files are gone), then update the derived layers. With
        ``roots``, files whose real path (links followed) is outside every root are reported
        in ``failed`` and skipped. The run holds the group's index lock throughout
        (:meth:`GraphStore.index_lock`): a second run into the group meanwhile is refused.
        ``action`` is what the caller does to the store, as a read-only store's refusal says
        it ("indexed into"; a delete passes "deleted from")."""
        if self.store.read_only:
            raise StoreLocationError.read_only(repr(self.store.location), action)
        with self.store.index_lock(self.group):
            return self._index_paths(paths, remove_missing, remove, roots)

    def _index_paths(
        self, paths: list[Path], remove_missing: bool, remove: Collection[str], roots: list[Path] | None
    ) -> IndexReport:
        from graphroute.core.api.constants import (
            EMBEDDER_MODEL_META,
            INDEX_PROFILE_META,
            INDEX_REPORT_META,
        )
        from graphroute.core.api.models import Label
        from graphroute.core.index.skeleton import doc_id_for, plan_document, skeletons
        from graphroute.core.lib.progress import track

        if paths:  # a delete alone runs the group's stored profile, whatever is installed now
            check_profile(self.profile, self.registry)
        t0 = time.perf_counter()
        indexed_at = datetime.now(UTC).isoformat(timespec="seconds")
        report = IndexReport()
        report.upgrades = self.store.upgrade_group(self.group)
        profile_json = self.profile.model_dump(by_alias=True, mode="json")
        model_id = self.embedder().model_id  # the runtime too: its vectors differ (EMBEDDER_MODEL_META)
        parse_fp, steps_fp = self.fingerprints()
        old_fp = self.store.get_meta(self.group, FINGERPRINT_META) or {}
        reparse_all = bool(old_fp) and old_fp.get("parse") != parse_fp
        # Written with the first document write of a run and cleared by its last write: a
        # run killed after writing documents but before its steps finished leaves it set,
        # so the next run rebuilds the derived layers even though no document changed.
        pending_fp = {"parse": old_fp.get("parse") or parse_fp, "steps": old_fp.get("steps"), "pending": True}
        interrupted = bool(old_fp.get("pending"))
        documents: dict[str, dict[str, Any]] = dict(self.store.get_meta(self.group, DOCUMENTS_META) or {})

        def run_meta(entries: Mapping[str, Any]) -> dict[str, Any]:
            """The meta every write of this run carries: its changes to the documents record
            (a MetaPatch, merged in the write's transaction, so on a store without an index
            lock a concurrent run into the same group keeps its own entries) and the fingerprint marked pending until the index
            steps have run."""
            return {DOCUMENTS_META: MetaPatch(entries), FINGERPRINT_META: pending_fp}

        # ---- load
        files, report.failed = collect_files([Path(p) for p in paths], roots, skipped=report.skipped)
        walked: set[Path] = set()  # the paths that are folders it could read
        # a folder that holds nothing to read (a wrong or emptied path) writes nothing, not
        # even a new group: said, or the run reads as a success and the next query finds no group
        reported = {str(f.get("path")) for f in report.failed}
        for folder in (Path(p) for p in paths):
            if str(folder) in reported:
                continue
            try:
                is_folder = folder.is_dir()
            except OSError:  # a path below a folder that cannot be searched: reported by collect_files
                continue
            if is_folder:
                walked.add(folder)
            if is_folder and not any(f.is_relative_to(folder) for f in files):
                report.warnings.append(
                    f"{folder}: no files to index in this folder (hidden files and what .graphrouteignore lists are left out)"
                )
        loaders = self._loaders()
        exts = sorted({e for ld in loaders for e in ld.extensions})
        loaded: list[Any] = []  # SourceDocuments to (re)index
        loaded_files: set[str] = set()  # files that loaded fine (their docs are current)
        yielded: set[str] = set()
        reader: dict[str, str | None] = {}  # doc id -> the loader version that read it (_reader)
        enter_phase("load")
        tl = time.perf_counter()
        for f in track(files, "load"):
            loader = next((ld for ld in loaders if ld.accepts(f)), None)
            if loader is None:
                report.skipped.append({"path": str(f), "reason": f"unsupported file type {f.suffix or '(none)'!r}; supported: {', '.join(exts)}"})
                continue
            try:
                docs = list(loader.load(f))
            except LoaderError as exc:
                report.failed.append({"path": str(f), "reason": _reason(exc, f)})
                continue
            except Exception as exc:  # a loader bug must not lose the rest of the folder
                report.failed.append({"path": str(f), "reason": f"{type(exc).__name__}: {exc}"})
                continue
            finally:  # what the loader left out of this file; a failed file's reason says it all
                left_out = loader.take_warnings()
            report.warnings.extend(f"{f}: {w}" for w in left_out)
            loaded_files.add(str(f.resolve()))
            encoding = next((str(d.metadata["encoding"]) for d in docs if d.metadata.get("encoding")), None)
            if encoding:
                report.encodings[str(f)] = encoding
            for d in docs:
                d.source = _absolute_source(d.source, f)
                did = doc_id_for(d.source)
                if did in yielded:
                    continue
                yielded.add(did)
                old = documents.get(did)
                reader[did] = _reader(loader)
                if old and old.get("hash") == d.content_hash and old.get("reader") == reader[did] and not reparse_all:
                    report.unchanged += 1
                    continue
                loaded.append(d)
        report.timings["load"] = time.perf_counter() - tl

        # ---- removed documents
        to_remove: list[str] = [did for did in dict.fromkeys(remove) if did in documents]
        # each document's file (a JSON corpus entry's source is "file#entry")
        sources = {did: str(info.get("source", "")).split("#", 1)[0] for did, info in documents.items()}
        if remove_missing:
            for did, file_part in sources.items():
                gone = is_gone(Path(file_part))
                dropped = file_part in loaded_files and did not in yielded
                if (gone or dropped) and did not in to_remove:
                    to_remove.append(did)
        else:  # said, or a deleted file's text keeps answering with no hint why
            folders = [Path(os.path.abspath(p)) for p in paths if p in walked]
            under = (Path(os.path.abspath(f)) for f in sources.values())
            stale = sum(1 for f in under if any(f.is_relative_to(d) for d in folders) and is_gone(f))
            if stale:
                report.warnings.append(
                    f"{stale} document{'s' if stale != 1 else ''} of this group came from files under "
                    "these folders that are gone; they stay in the group (--remove-missing removes them)"
                )

        # ---- a run that would parse part of the group otherwise than the rest: refused
        # before it writes. Only the documents it reads are parsed again, and the group's
        # record then says all were parsed this way, so the others would stay as they are.
        if paths and reparse_all:
            left = [did for did in documents if did not in yielded and did not in to_remove]
            if left:
                raise self._partial_reparse(documents, left, profile_json)

        # ---- parse, embed, write in batches of documents
        changed: set[str] = set()
        parse_stats: dict[str, int] = {}
        tp = te = tw = 0.0
        limits = self._limits()
        if loaded:
            seg_split = self.segmenter().split

            def write_window(window: list[tuple[list[Any], list[Any]]], vecs: dict[str, Any]) -> None:
                """Store writes for a window of document batches: a changed document is
                replaced atomically on its own; the window's new documents go through one
                ``write_batches`` call, a batch of them per ``DocumentBatch``.

                The documents meta (which documents are indexed, by content hash) must never
                list a document whose write did not commit, or the next run would skip it.
                The meta with the window's documents added goes with the call: a one-writer
                store (the embedded one) commits it in the same transaction as the batches.
                A store that keeps several writes in flight (``write_concurrency`` > 1,
                Neo4j) may commit some batches and fail on another, so its documents are
                first recorded with no hash ("in flight", so a crashed run's next one
                replaces them rather than trusting them) and get their hashes in the meta
                written once every batch has committed."""
                fresh: list[DocumentBatch] = []
                entries: dict[str, dict[str, Any]] = {}
                for batch, skels in window:
                    new_docs: list[DocumentBatch] = []
                    for sk, d in zip(skels, batch, strict=True):
                        for k, v in sk.stats.items():
                            parse_stats[k] = parse_stats.get(k, 0) + v
                        entry = {
                            "hash": d.content_hash, "source": d.source, "title": d.title,
                            "indexed_at": indexed_at,
                        }
                        if reader.get(sk.doc_id):
                            entry["reader"] = reader[sk.doc_id]
                        changed.add(sk.doc_id)
                        report.sentences_written += len(sk.sentence_ids)
                        if sk.doc_id not in documents:
                            entries[sk.doc_id] = entry
                            new_docs.append(DocumentBatch(sk.nodes, sk.edges, vecs[sk.doc_id]))
                        else:  # a changed document: its old subgraph is replaced atomically
                            documents[sk.doc_id] = entry
                            self.store.write(
                                self.group, sk.nodes, sk.edges, vecs[sk.doc_id],
                                replace_doc=sk.doc_id, meta=run_meta({sk.doc_id: entry}),
                            )
                    if new_docs:
                        fresh.append(merge_batches(new_docs))
                if not fresh:
                    return
                if self.store.write_concurrency > 1 and len(fresh) > 1:
                    in_flight = {did: {**e, "hash": None} for did, e in entries.items()}
                    self.store.write(self.group, meta=run_meta(in_flight))
                self.store.write_batches(self.group, fresh, meta=run_meta(entries))
                documents.update(entries)  # only once they are written

            bar_totals = {
                "parse": (float(sum(_text_chars(d) for d in loaded)), "characters"),
                "embed": (float(len(loaded)), "documents"),
                "write": (float(len(loaded)), "documents"),
            }
            with _phase_bars(bar_totals) as bars:

                def parsed() -> Iterator[tuple[list[Any], list[Any]]]:
                    """Batches of DOC_BATCH documents with their skeletons, parsed as the
                    windows below ask for them."""
                    nonlocal tp
                    for i in range(0, len(loaded), DOC_BATCH):
                        batch = loaded[i : i + DOC_BATCH]
                        enter_phase("parse")
                        with watch_model_loads() as w:
                            plans = [plan_document(d, doc_id_for(d.source)) for d in batch]
                            chars = float(sum(_text_chars(d) for d in batch))
                            with _metered(bars["parse"], chars):  # a segmenter may report inside a document
                                skels = skeletons(plans, seg_split, self.group, limits)
                            release_free_memory()  # spaCy's per-batch garbage (see there)
                        tp += w.seconds
                        report.add_model_loads(w)
                        yield batch, skels

                for window in embed_windows(parsed(), lambda parsed_batch: embed_text_count(parsed_batch[1])):
                    enter_phase("embed")
                    with watch_model_loads() as w:
                        vecs = self._embed([sk for _, sks in window for sk in sks])
                    te += w.seconds
                    report.add_model_loads(w)
                    bars["embed"].advance(sum(len(b) for b, _ in window))
                    enter_phase("write")
                    t = time.perf_counter()
                    write_window(window, vecs)
                    tw += time.perf_counter() - t
                    bars["write"].advance(sum(len(b) for b, _ in window))
                    del vecs, window
                    release_free_memory()  # the window's parse and embed garbage (see there)
        report.timings.update(parse=tp, embed=te, write=tw)
        report.indexed = len(changed)
        report.parse = parse_stats

        for did in to_remove:
            documents.pop(did, None)
            self.store.write(self.group, replace_doc=did, meta=run_meta({did: None}))
        report.removed = len(to_remove)

        # ---- index steps
        steps_changed = old_fp.get("steps") != steps_fp or interrupted
        dirty = bool(changed or to_remove or reparse_all)
        if (dirty or steps_changed) and (documents or to_remove):
            step_changed_docs = set(changed) if not steps_changed else set(documents)
            with watch_model_loads() as w:
                report.steps = self._run_steps(step_changed_docs, set(to_remove), report)
            report.timings["steps"] = w.seconds
            report.add_model_loads(w)
        enter_phase("done")
        counts = self.store.counts(self.group)
        report.documents = counts.get("nodes", {}).get(Label.DOCUMENT.value, 0)
        report.sentences = counts.get("nodes", {}).get(Label.SENTENCE.value, 0)
        emb = self._embedder
        if emb is not None:
            report.embedding_cache = {"hits": getattr(emb, "hits", 0), "misses": getattr(emb, "misses", 0)}
        report.seconds = time.perf_counter() - t0
        if (dirty or steps_changed) and (documents or to_remove):
            # only a run that changed something rewrites the meta (a write bumps the group
            # version and would invalidate every cache for nothing)
            # a step that failed left its layer unbuilt: the run stays pending, so the next
            # one runs the steps again even though no document changed
            done_fp: dict[str, Any] = {"parse": parse_fp, "steps": steps_fp}
            if failed_steps({"steps": report.steps}):
                done_fp["pending"] = True
            self.store.write(self.group, meta={
                FINGERPRINT_META: done_fp,
                INDEX_PROFILE_META: profile_json,
                EMBEDDER_MODEL_META: model_id,
                INDEX_REPORT_META: report.to_json(),
            })
        return report

    # ------------------------------------------------------------------ helpers
    def _partial_reparse(
        self, documents: Mapping[str, Any], left: list[str], profile_json: Mapping[str, Any]
    ) -> ProfileMismatchError:
        """The refusal of a run that would parse only some of the group's documents with
        settings the rest were not parsed with, saying what differs and how to go on."""
        from graphroute.core.api.constants import INDEX_PROFILE_META

        stored = self.store.get_meta(self.group, INDEX_PROFILE_META)
        parts = [k for k in PARSE_PARTS if isinstance(stored, dict) and stored.get(k) != profile_json.get(k)]
        why = (
            f"the profile's {', '.join(parts)} {'differs' if len(parts) == 1 else 'differ'} from the group's" if parts
            else "the same profile, but graphroute's own parsing or embedding changed since"
        )
        return ProfileMismatchError(
            f"group {self.group!r} was indexed with other parse or embedding settings ({why}): this run reads "
            f"{len(documents) - len(left)} of its {len(documents)} documents and would leave the other {len(left)} "
            "parsed and embedded the old way, one group with vectors of two kinds; nothing was written. Index all "
            f"of the group's documents in one run with this profile (`graphroute documents --group {self.group}` "
            "lists their files), or index with the profile the group was indexed with (--profile)"
        )

    @staticmethod
    def _embed_in_chunks(emb: Embedder, skels: list[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Chunk vectors and each document's sentence vectors from one pass over the chunks
        (``sentence_vectors: in_chunk``): a sentence is pooled from its chunk's outputs."""
        texts = [t for sk in skels for t in sk.chunk_embed_texts]
        heads = [h for sk in skels for h in sk.chunk_heads]
        spans: list[list[tuple[int, int]]] = [[] for _ in texts]
        where: list[list[tuple[int, int]]] = []  # per document: (chunk row, span number) of each sentence
        base = 0
        for sk in skels:
            rows = []
            for ci, start, end in sk.sentence_spans:
                rows.append((base + ci, len(spans[base + ci])))
                spans[base + ci].append((start, end))
            where.append(rows)
            base += len(sk.chunk_embed_texts)
        if not texts:
            return np.zeros((0, emb.dimension), np.float32), [np.zeros((0, emb.dimension), np.float32) for _ in skels]
        chunk_vecs, span_vecs = emb.embed_spans(texts, heads, spans)
        dim = chunk_vecs.shape[1]
        sent = [np.stack([span_vecs[r][j] for r, j in rows]) if rows else np.zeros((0, dim), np.float32) for rows in where]
        return chunk_vecs, sent

    def _embed(self, skels: list[Any]) -> dict[str, dict[str, tuple[list[str], np.ndarray]]]:
        """Sentence and chunk vectors for a batch; section vectors are the renormalised mean
        of the section's own sentence vectors (no extra model call; sections without direct
        sentences get no vector)."""
        from graphroute.core.api.models import VectorSpace
        from graphroute.core.lib.embed_cache import is_contextual, reads_spans

        emb = self.embedder()
        chunk_texts = [t for sk in skels for t in sk.chunk_embed_texts]
        if self.profile.parse.sentence_vectors == "in_chunk" and reads_spans(emb) and not is_contextual(emb):
            chunk_vecs, sent = self._embed_in_chunks(emb, skels)
        elif is_contextual(emb):  # units embedded in their document's context: per document
            sent = emb.embed_contextual([sk.sentence_embed_texts for sk in skels])
            chunk_vecs = emb.embed(chunk_texts) if chunk_texts else np.zeros((0, emb.dimension), np.float32)
        else:  # one call over sentences and chunks (see EMBED_WINDOW_TEXTS), split back
            sent_texts = [t for sk in skels for t in sk.sentence_embed_texts]
            flat = sent_texts + chunk_texts
            all_vecs = emb.embed(flat) if flat else np.zeros((0, emb.dimension), np.float32)
            chunk_vecs = all_vecs[len(sent_texts) :]
            sent = []
            si = 0
            for sk in skels:
                sent.append(all_vecs[si : si + len(sk.sentence_embed_texts)])
                si += len(sk.sentence_embed_texts)
        out: dict[str, dict[str, tuple[list[str], np.ndarray]]] = {}
        ci = 0
        for sk, sv in zip(skels, sent, strict=True):
            cv = chunk_vecs[ci : ci + len(sk.chunk_ids)]
            ci += len(sk.chunk_ids)
            spaces: dict[str, tuple[list[str], np.ndarray]] = {}
            if sk.sentence_ids:
                spaces[VectorSpace.SENTENCE.value] = (list(sk.sentence_ids), np.asarray(sv, dtype=np.float32))
                by_sec: dict[str, list[int]] = {}
                for j, sec in enumerate(sk.sentence_sections):
                    by_sec.setdefault(sec, []).append(j)
                sec_ids = list(by_sec)
                means = np.stack([np.asarray(sv)[by_sec[s]].mean(axis=0) for s in sec_ids]).astype(np.float32)
                spaces[VectorSpace.SECTION.value] = (sec_ids, normalise_in_place(means))
            if sk.chunk_ids:
                spaces[VectorSpace.CHUNK.value] = (list(sk.chunk_ids), np.asarray(cv, dtype=np.float32))
            out[sk.doc_id] = spaces
        return out

    def _steps_key(self, steps: Any) -> Any:
        """What the steps' fingerprint covers: the profile's steps, and the layer version of
        each step past its first (``IndexStep.layer_version``; a profile of first versions
        keeps the fingerprint it always had)."""
        versions = {}
        for spec in self.profile.steps:
            if spec.use in self.registry.index_steps:
                version = self.registry.index_steps.get(spec.use).layer_version
                if version > 1:
                    versions[spec.use] = version
        return [steps, versions] if versions else steps

    def _run_steps(self, changed: set[str], removed: set[str], report: IndexReport) -> dict[str, Any]:
        ctx = IndexContext(
            store=self.store, group=self.group, registry=self.registry, embedder=self.embedder(),
            profile=self.profile, settings=self.settings, changed_docs=changed, removed_docs=removed,
            llm_factory=_llm_factory(self.settings, self.registry),
        )
        results: dict[str, Any] = {}
        for spec in self.profile.steps:
            if not spec.enabled:
                results[spec.use] = {"skipped": "disabled in the profile"}
                continue
            if spec.use not in self.registry.index_steps:
                msg = f"index step {spec.use!r} is not registered (plugin not installed?); skipped"
                report.warnings.append(msg)
                results[spec.use] = {"skipped": "not registered"}
                continue
            cls = self.registry.index_steps.get(spec.use)
            enter_phase(f"step:{spec.use}")
            try:
                with watch_model_loads() as watch:
                    step = cls(cls.Params(**spec.with_))
                    stats = step.run(ctx) or {}
            except Exception as exc:  # documents are safe; report the broken step loudly
                msg = f"index step {spec.use!r} failed: {type(exc).__name__}: {exc}; the next index run of the group runs it again"
                report.warnings.append(msg)
                results[spec.use] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            finally:
                release_free_memory()  # what the step freed, before the next step allocates
            stats = dict(stats)
            stats.setdefault("seconds", round(watch.seconds, 3))
            results[spec.use] = stats
            ctx.stats[spec.use] = stats
        return results


def _reader(loader: Any) -> str | None:
    """What a document's entry records of the loader that read it: ``name/version`` from
    version 2 on, nothing for a first version (so entries written before loaders had versions
    stay current)."""
    version = int(getattr(loader, "version", 1))
    return f"{loader.name}/{version}" if version > 1 else None


def _reason(exc: Exception, path: Path) -> str:
    """The loader's message without a repeated path prefix."""
    msg = str(exc)
    prefix = f"{path}: "
    return msg[len(prefix) :] if msg.startswith(prefix) else msg


def _absolute_source(source: str, path: Path) -> str:
    """Sources are absolute so a document keeps its id whatever the working directory."""
    file_part, sep, frag = source.partition("#")
    if file_part == str(path):
        return str(path.resolve()) + sep + frag
    return source


def _llm_factory(settings: Settings, registry: Registry) -> Callable[[], LLMClient | None] | None:
    try:
        from graphroute.core.config.clients import llm_factory
    except ImportError:
        return None
    try:
        return llm_factory(settings, registry)
    except Exception:
        return None


def _text_chars(doc: Any) -> int:
    """The characters of a loaded document's blocks: the parse bar's unit, so a document of
    megabytes moves the bar while it is parsed instead of counting as one step."""
    return sum(len(b.text) for b in doc.blocks)


@contextmanager
def _metered(bar: Any, chars: float) -> Iterator[None]:
    """Advance ``bar`` by what the segmenter reports done (``progress.work_done``) during
    the block, at most ``chars``, and by the rest of ``chars`` when it ends."""
    from graphroute.core.lib.progress import meter

    reported = 0.0

    def on_work(amount: float) -> None:
        nonlocal reported
        step = max(0.0, min(amount, chars - reported))
        reported += step
        if step:
            bar.advance(step)

    with meter(on_work):
        yield
    if chars > reported:
        bar.advance(chars - reported)


@contextmanager
def _phase_bars(totals: Mapping[str, tuple[float, str]]) -> Iterator[dict[str, Any]]:
    """One live display with a bar per phase (characters parsed; documents embedded and
    written): ``totals`` maps each phase to its total and unit.

    rich allows one live display at a time, so the phases share one ``Progress`` instead of
    nesting :func:`graphroute.core.lib.progress.bar` calls; same look, same on/off switch.
    """
    from graphroute.core.lib.progress import Bar, enabled

    if not enabled():
        yield {p: Bar(None, None, f"{p} {unit}", total) for p, (total, unit) in totals.items()}
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
    )
    with progress:
        yield {
            p: Bar(progress, progress.add_task(f"{p} {unit}", total=total), f"{p} {unit}", total)
            for p, (total, unit) in totals.items()
        }
