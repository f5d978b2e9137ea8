"""Concurrent index and query on the embedded store: no reader ever sees a half-written index.

A writer re-indexes three documents back and forth between two versions (different
sentences, different sentence counts) with the real Indexer. Meanwhile

* a reader *process* (its own SQLite connection, as a server querying while ``graphroute
  index`` runs) reads every document's sentences over and over: each read must show each
  document exactly in its old or its new version, never a partial set of sentences;
* a reader *thread* runs a real route: no error, and every evidence text is made of
  sentences of one of the versions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from graphroute.core.config.settings import Settings
from graphroute.core.engine import GraphRoute, open_store
from graphroute.core.index.pipeline import Indexer
from graphroute.core.registry import get_registry

from tests.indexing.conftest import skeleton_profile
from tests.reliability.conftest import REPO

ROUNDS = 6


def version(doc: int, v: int) -> list[str]:
    """Sentences of document ``doc`` in version ``v`` (v1: 3 sentences, v2: 5)."""
    n = 3 if v == 1 else 5
    word = "first" if v == 1 else "second"
    return [f"In the {word} edition, the harbour logbook {doc} records ferry crossing number {k} at dawn." for k in range(n)]


def write_docs(folder: Path, v: int) -> None:
    for d in range(3):
        (folder / f"log{d}.txt").write_text("\n\n".join(version(d, v)) + "\n", encoding="utf-8")


READER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from graphroute.core.engine import open_store
    store_dir, group, stop, versions = sys.argv[1], sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])
    known = {frozenset(s) for s in versions}
    store = open_store(store_dir)
    reads, bad, seen = 0, [], set()
    while not stop.exists() and reads < 200000:
        by_doc = {}
        for n in store.iter_nodes(group, "Sentence"):
            by_doc.setdefault(n.doc_id, set()).add(n.props["text"])
        docs = [n.id for n in store.iter_nodes(group, "Document")]
        for doc_id in docs:  # also one document at a time
            one = {n.props["text"] for n in store.iter_nodes(group, "Sentence", doc_id=doc_id)}
            if frozenset(one) not in known:
                bad.append(sorted(one))
        for texts in by_doc.values():
            if frozenset(texts) not in known:
                bad.append(sorted(texts))
            else:
                seen.add("first" if any("first edition" in t for t in texts) else "second")
        reads += 1
        if reads == 1:
            stop.with_name("ready").write_text("ready")
    store.close()
    print(json.dumps({"reads": reads, "bad": bad[:5], "n_bad": len(bad), "seen": sorted(seen)}))
    """
)


def test_readers_never_see_a_half_written_document(tmp_path: Path, settings: Settings) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    store_dir = tmp_path / "store"
    write_docs(docs, 1)
    store = open_store(str(store_dir))
    indexer = Indexer(store, "g", registry=get_registry(), settings=settings, profile=skeleton_profile())
    assert indexer.index_paths([docs]).indexed == 3
    versions = [version(d, v) for d in range(3) for v in (1, 2)]
    all_sentences = sorted({s for vs in versions for s in vs}, key=len, reverse=True)

    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(store_dir), "g", str(stop), json.dumps(versions)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    gr = GraphRoute(store=store, group="g", settings=settings)
    query_errors: list[str] = []
    foreign: list[str] = []
    queries = 0
    done = threading.Event()

    def query_loop() -> None:
        nonlocal queries
        while not done.is_set():
            try:
                result = gr.query("Which ferry crossing does the harbour logbook record?", route="route1s_sentence")
            except Exception as exc:
                query_errors.append(f"{type(exc).__name__}: {exc}")
                continue
            queries += 1
            for e in result.evidence:
                rest = e.text
                for s in all_sentences:
                    rest = rest.replace(s, "")
                if rest.strip(" \n.,;"):
                    foreign.append(e.text)

    thread = threading.Thread(target=query_loop)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "ready").exists():  # the reader imported graphroute and read once
            assert reader.poll() is None, reader.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for r in range(ROUNDS):
            write_docs(docs, 2 if r % 2 == 0 else 1)
            report = indexer.index_paths([docs])
            assert report.indexed == 3 and report.failed == []
    finally:
        done.set()
        thread.join(timeout=300)
        stop.write_text("stop")
        out, err = reader.communicate(timeout=300)
        store.close()
    assert reader.returncode == 0, err
    seen = json.loads(out)
    print(f"concurrent index/query: {ROUNDS} re-index rounds, {seen['reads']} reader-process reads, {queries} route queries")
    assert seen["n_bad"] == 0, seen["bad"]
    assert seen["reads"] > ROUNDS and seen["seen"] == ["first", "second"], seen  # it really ran alongside
    assert not query_errors, query_errors[:3]
    assert queries > 0 and not foreign, foreign[:3]


def test_a_second_run_into_a_group_being_indexed_is_refused(tmp_path: Path, settings: Settings, cache_dir: Path) -> None:
    """Two index runs into one group at once would each build the derived layers (kNN edges,
    entity graph, communities) from what it read, and the one finishing last would leave them
    without the other's documents, with nothing pending for a later run to repair. While a
    run is in its index steps, a second ``graphroute index`` or ``delete`` of that group is
    refused with a clear message and writes nothing; another group of the store is free."""
    from graphroute.core.api.components import IndexStep
    from graphroute.core.config.index_profile import ComponentSpec
    from graphroute.core.hookspecs import hookimpl
    from graphroute.core.registry import build_registry

    from tests.reliability.conftest import assert_no_traceback, run_cli

    first = tmp_path / "first"
    first.mkdir()
    write_docs(first, 1)
    second = tmp_path / "second.txt"
    second.write_text("The lighthouse keeper rows to the island every Sunday morning.\n", encoding="utf-8")
    store_dir = tmp_path / "store"
    seen: dict[str, subprocess.CompletedProcess[str]] = {}

    class HoldForOtherRuns(IndexStep):
        name = "hold_for_other_runs"

        def run(self, ctx):  # type: ignore[no-untyped-def]
            where = ("--store", str(store_dir))
            seen["same"] = run_cli("index", str(second), *where, "--group", "g", cache=cache_dir)
            seen["delete"] = run_cli("delete", *where, "--group", "g", "--yes", cache=cache_dir)
            seen["other"] = run_cli("index", str(second), *where, "--group", "other", cache=cache_dir)
            return {}

    class Plugin:
        @hookimpl
        def register_index_steps(self) -> list[type[IndexStep]]:
            return [HoldForOtherRuns]

    profile = skeleton_profile()
    profile.steps.insert(1, ComponentSpec(use="hold_for_other_runs"))
    store = open_store(str(store_dir))
    try:
        report = Indexer(
            store, "g", registry=build_registry(extra_plugins=[Plugin()]), settings=settings, profile=profile
        ).index_paths([first])
        assert report.indexed == 3 and report.warnings == []
        for name in ("same", "delete"):
            r = seen[name]
            assert_no_traceback(r)
            assert r.returncode == 3, (name, r.stdout + r.stderr)
            assert "group 'g'" in r.stderr and "another index run or delete" in r.stderr, r.stderr
            assert "wait for it to finish" in r.stderr, r.stderr
        assert seen["other"].returncode == 0, seen["other"].stderr  # the lock is the group's, not the store's
        titles = sorted(n.props["title"] for n in store.iter_nodes("g", "Document"))
        assert titles == ["log0", "log1", "log2"]  # the refused run wrote nothing, the delete deleted nothing
    finally:
        store.close()

    again = run_cli("index", str(second), "--store", str(store_dir), "--group", "g", cache=cache_dir)
    assert again.returncode == 0, again.stderr  # once the first run is done, the second one runs
