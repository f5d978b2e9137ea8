"""Neo4j going away in the middle of ``graphroute index``, on the project's server: the run
talks to it through a TCP relay of this test, which is cut while the run is held between two
index steps (the pause plugin). The run must exit 3 with one message that names the server,
says that what was written stays and how to finish; the next run of the same input, against
the server itself, finishes the group.

Skipped when the project's server is unreachable, except in CI (``CI=true``), where it must run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.engine import open_store

from tests.conformance.conftest import neo4j_settings
from tests.dev_neo4j import NEO4J_URI, needs_server, server_address
from tests.reliability.conftest import GRAPHROUTE, REPO, assert_no_traceback, cli_env, run_cli
from tests.reliability.test_interrupts import PLUGIN, SAMPLE

PASSWORD = os.environ.get("NEO4J_PASSWORD") or "graphroute-dev"


class Relay:
    """Forwards every connection made to its own loopback port to the Neo4j server; ``cut``
    closes the port and every forwarded connection, as a server that went away does."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # the listener was closed: cut
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        # shutdown wakes the accept blocked in the other thread (close alone leaves it listening)
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


def paused_profile(folder: Path, seconds: float) -> Path:
    """The default profile with a pause of ``seconds`` after the entity graph."""
    text = (REPO / "routes" / "index" / "default.yaml").read_text(encoding="utf-8")
    anchor = "  - use: entity_graph\n    with: {extractor: spacy}\n"
    assert anchor in text
    path = folder / "paused.yaml"
    path.write_text(
        text.replace(anchor, anchor + f"  - use: t_pause_step\n    with: {{seconds: {seconds}}}\n"), encoding="utf-8"
    )
    return path


@pytest.fixture
def group() -> Iterator[str]:
    name = f"cut-{uuid.uuid4().hex[:10]}"
    yield name
    store = open_store(NEO4J_URI, settings=neo4j_settings())
    try:
        store.delete_group(name)
    finally:
        store.close()


@needs_server
def test_neo4j_gone_mid_index_says_what_stays_and_the_next_run_finishes(
    tmp_path: Path, cache_dir: Path, group: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("property_management_agreement.md", "appliance_warranty.txt"):
        shutil.copy(SAMPLE / name, docs / name)
    profile = paused_profile(tmp_path, seconds=1.0)
    relay = Relay(server_address())
    marker = tmp_path / "paused"
    # short driver retries: the cut is for good, waiting out the default 30 s proves nothing
    params = json.dumps({"neo4j": {"retry_s": 1.0, "connect_attempts": 1}})
    env = cli_env(cache_dir, GRAPHROUTE_PLUGINS=PLUGIN, GRAPHROUTE_TEST_PAUSE=str(marker),
                  GRAPHROUTE_STORE_PARAMS=params, NEO4J_PASSWORD=PASSWORD)
    args = ["index", str(docs), "--group", group, "--profile", str(profile)]
    proc = subprocess.Popen([GRAPHROUTE, *args, "--store", f"bolt://127.0.0.1:{relay.port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():  # the documents are written, the steps after the pause are not
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached its pause"
            time.sleep(0.05)
        relay.cut()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert_no_traceback(r)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert f"bolt://127.0.0.1:{relay.port}" in err and "unreachable" in err, err
    assert "what was written so far stays indexed" in err, err
    assert "run the same `graphroute index` again to finish" in err, err

    where = ["--store", NEO4J_URI, "--group", group]
    stats = run_cli("stats", *where, "--json", cache=cache_dir, NEO4J_PASSWORD=PASSWORD)
    assert stats.returncode == 0, stats.stderr
    kept = json.loads(stats.stdout)
    assert kept["nodes"]["Document"] == 2 and kept["unfinished_run"] is True, kept

    # the cut run could not release its index lock: its lease runs out (30 s) before the
    # next run gets the group, as the busy message says
    deadline = time.monotonic() + 120
    while True:
        again = run_cli(*args, *where, "--json", cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN, NEO4J_PASSWORD=PASSWORD)
        if again.returncode != 3 or "is being written by another index run" not in again.stderr:
            break
        assert time.monotonic() < deadline, again.stderr
        time.sleep(2)
    assert again.returncode == 0, again.stderr
    stats = run_cli("stats", *where, "--json", cache=cache_dir, NEO4J_PASSWORD=PASSWORD)
    done = json.loads(stats.stdout)
    assert done["unfinished_run"] is False and done["nodes"].get("Community", 0) > 0, done
