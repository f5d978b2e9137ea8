"""Faults during indexing: kill -9, a full disk, Neo4j unreachable.

* kill -9: ``graphroute index`` adds documents to an indexed group and is killed with
  SIGKILL as soon as its first document write lands (the index steps are then running). The
  embedded store must open and read afterwards, and a plain rerun must finish the job with
  exactly the counts of a run that was never interrupted.
* disk full: the store lives on a 16 MB tmpfs (this sandbox runs as root, so ``mount -t
  tmpfs`` works; the test skips when it does not), filled up before an index run: a clear
  error, a non-zero exit, no traceback, nothing indexed before is lost, and once space is
  free again the same command completes.
* Neo4j down at start: a clear error naming the URI, non-zero exit, no traceback. Neo4j
  going down mid-index needs a server of its own and lives in the load suite (test_load.py).

Remote model API errors (429/5xx/timeouts) are covered by tests/services/.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from graphroute.core.api.constants import DOCUMENTS_META
from graphroute.core.config.settings import Settings
from graphroute.core.engine import open_store
from graphroute.core.index.pipeline import Indexer
from graphroute.core.registry import get_registry

from tests.reliability.conftest import (
    GRAPHROUTE,
    assert_no_traceback,
    cli_env,
    run_cli,
    when_paused,
)

MUSIQUE = Path("/work/shared/datasets/musique/corpus.json")


def musique(n: int, start: int = 0) -> list[dict[str, str]]:
    entries = json.loads(MUSIQUE.read_text(encoding="utf-8"))
    return [{"title": e["title"], "text": e["text"]} for e in entries[start : start + n]]


def counts(store_dir: Path, group: str) -> dict[str, dict[str, int]]:
    store = open_store(str(store_dir))
    try:
        return store.counts(group)
    finally:
        store.close()


def sentence_count(db: Path, group: str) -> int:
    """Read the SQLite file directly (another process is writing it)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            row = conn.execute("SELECT COUNT(*) FROM nodes WHERE grp = ? AND label = 'Sentence'", (group,)).fetchone()
            return int(row[0])
    except sqlite3.Error:
        return -1


def index_in_process(store_dir: Path, group: str, paths: list[Path], settings: Settings) -> dict[str, object]:
    store = open_store(str(store_dir))
    try:
        return Indexer(store, group, registry=get_registry(), settings=settings).index_paths(paths).to_json()
    finally:
        store.close()


def assert_consistent(store_dir: Path, group: str) -> None:
    """Every document in the group's record has its Document node and sentences, and every
    sentence has its vector: no half-written document."""
    store = open_store(str(store_dir))
    try:
        docs = store.get_meta(group, DOCUMENTS_META) or {}
        nodes = {n.id: n for n in store.iter_nodes(group, "Document")}
        assert set(docs) == set(nodes), "document record and Document nodes disagree"
        sentences = list(store.iter_nodes(group, "Sentence"))
        per_doc = {d: 0 for d in nodes}
        for s in sentences:
            per_doc[s.doc_id] += 1
        assert all(per_doc.values()), [d for d, n in per_doc.items() if not n][:3]
        assert store.counts(group)["vectors"].get("sentence", 0) == len(sentences)
    finally:
        store.close()


# --------------------------------------------------------------------------- kill -9


def test_kill_9_during_index_then_rerun_matches_uninterrupted(tmp_path: Path, settings: Settings, cache_dir: Path) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(musique(24)), encoding="utf-8")
    store = tmp_path / "killed"
    first = index_in_process(store, "g", [corpus], settings)
    assert first["indexed"] == 24
    reference = tmp_path / "reference"
    shutil.copytree(store, reference)

    corpus.write_text(json.dumps(musique(40)), encoding="utf-8")  # 16 new passages, one write batch
    before = sentence_count(store / "graph.sqlite", "g")
    proc = subprocess.Popen(
        [GRAPHROUTE, "index", str(corpus), "--store", str(store), "--group", "g"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env(cache_dir),
    )
    try:
        deadline = time.monotonic() + 600
        while sentence_count(store / "graph.sqlite", "g") <= before:
            assert proc.poll() is None, f"index finished before it could be killed: {proc.stderr.read() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "no document write within 600 s"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the documents are written; the index steps are running
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    assert_consistent(store, "g")  # readable, no half-written document
    interrupted = counts(store, "g")
    assert interrupted["nodes"]["Document"] == 40

    rerun = index_in_process(store, "g", [corpus], settings)
    assert rerun["failed"] == []
    uninterrupted = index_in_process(reference, "g", [corpus], settings)
    assert uninterrupted["indexed"] == 16
    assert counts(store, "g") == counts(reference, "g")
    assert_consistent(store, "g")


# --------------------------------------------------------------------------- disk full


@pytest.fixture
def small_disk(tmp_path: Path) -> object:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); run as root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_is_a_clear_error_and_loses_nothing(small_disk: Path, tmp_path: Path, settings: Settings, cache_dir: Path) -> None:
    store = small_disk / "store"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "first.txt").write_text("The ferry leaves the north pier at noon. Tickets are sold on board.\n", encoding="utf-8")
    assert index_in_process(store, "g", [docs], settings)["indexed"] == 1
    before = counts(store, "g")

    big = docs / "second.json"
    big.write_text(json.dumps(musique(30, start=100)), encoding="utf-8")
    free = shutil.disk_usage(small_disk).free
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * max(0, free - 48 * 1024))  # leave 48 KB: the first page writes fit

    r = run_cli("index", str(docs), "--store", str(store), "--group", "g", cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "disk is full" in r.stderr or "No space left" in r.stderr, r.stderr
    assert counts(store, "g") == before
    assert_consistent(store, "g")

    filler.unlink()
    again = index_in_process(store, "g", [docs], settings)
    assert again["failed"] == [] and again["documents"] == 31
    assert_consistent(store, "g")


# --------------------------------------------------------------------------- Neo4j down at start


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", ["index", "query", "stats"])
def test_neo4j_down_at_start(command: str, tmp_path: Path, cache_dir: Path) -> None:
    uri = f"bolt://127.0.0.1:{_closed_port()}"
    doc = tmp_path / "doc.txt"
    doc.write_text("The ferry leaves the north pier at noon every day.", encoding="utf-8")
    args = {"index": ["index", str(doc)], "query": ["query", "when does the ferry leave?"], "stats": ["stats"]}[command]
    r = run_cli(*args, "--store", uri, "--group", "g", cache=cache_dir, NEO4J_PASSWORD="graphroute-dev")
    assert_no_traceback(r)
    assert r.returncode != 0
    assert uri in r.stderr and "error" in r.stderr.lower(), r.stderr


# --------------------------------------------------------------------------- a damaged file


def test_a_damaged_store_file_is_a_clear_error_naming_it(tmp_path: Path, settings: Settings, cache_dir: Path) -> None:
    """A store file whose pages were overwritten (a disk fault, a copy cut short): every
    command that reads it stops with a message that names the file, says it is damaged and
    what to do, and no traceback."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ferry.txt").write_text("The ferry leaves the north pier at noon. Tickets are sold on board.\n", encoding="utf-8")
    store = tmp_path / "store"
    assert index_in_process(store, "g", [docs], settings)["indexed"] == 1
    db = store / "graph.sqlite"
    page = 4096
    rng = random.Random(7)
    with db.open("r+b") as f:  # every page but the first (the schema) loses its header
        for offset in range(2 * page, db.stat().st_size, page):
            f.seek(offset)
            f.write(rng.randbytes(64))

    (docs / "pier.txt").write_text("The north pier was rebuilt after the storm of 1998.\n", encoding="utf-8")
    for args in (["stats"], ["query", "When does the ferry leave?"], ["index", str(docs)]):
        r = run_cli(*args, "--store", str(store), "--group", "g", cache=cache_dir)
        assert_no_traceback(r)
        assert r.returncode == 1, (args, r.stdout + r.stderr)
        assert f"the embedded store file '{db}' is damaged" in r.stderr.replace("\n", ""), (args, r.stderr)
        assert "restore the store folder from a backup, or delete it and index the documents again" in r.stderr, r.stderr


def test_a_store_folder_deleted_during_index_ends_without_a_traceback(tmp_path: Path, cache_dir: Path) -> None:
    # the run is held in its loader, before its first commit starts the store's checkpoint
    # thread; the folder is deleted there, and the run goes on into a store that is gone
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ferry.pause").write_text("The ferry to Ashford leaves the north pier at noon.\n", encoding="utf-8")
    store = tmp_path / "store"
    r = when_paused(["index", str(docs), "--store", str(store), "--group", "g"], tmp_path / "paused", cache_dir,
                    lambda _: shutil.rmtree(store))
    err = r.stderr
    assert_no_traceback(r)
    # the steps that open the store again fail, as any step that cannot read the store does,
    # and say why
    assert r.returncode == 1, err
    assert f"the store folder {str(store)!r} was deleted while this process had it open" in err, err
    assert "checkpoint" not in err and "unable to open database file" not in err, err
