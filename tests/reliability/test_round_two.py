"""Reliability, round two (issue 43): bounded work per request, no lost updates, no way around
the index root. One test (or a few) per numbered case of the issue; the two load cases (four
long queries against the HTTP server, Neo4j stopped under a running server) are in
``test_load.py``.

Everything runs on the real embedded store, the real CLI (a subprocess) or the real FastAPI
app; the small test stages of ``tests/server/stages.py`` stand in for a slow route.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute
from graphroute.core.api.constants import DOCUMENTS_META
from graphroute.core.api.store import GraphStore
from graphroute.core.api.values import parse_bool
from graphroute.core.config.overrides import (
    overrides_from_cli,
    overrides_from_env,
    overrides_from_mapping,
)
from graphroute.core.config.settings import DEFAULT_MAX_QUESTION_CHARS, Settings
from graphroute.core.engine import open_store
from graphroute.core.errors import (
    EXIT_FILES_FAILED,
    BadBooleanError,
    GroupBusyError,
    NotFoundError,
    QueryTimeoutError,
    QuestionError,
)
from graphroute.core.index.pipeline import Indexer
from graphroute.core.lib.textcodec import decode_text
from graphroute.core.registry import build_registry
from graphroute.plugins.seeds.entity_seeds import MAX_CANDIDATES, Lexicon, offline_names

from tests.reliability.conftest import GRAPHROUTE, REPO, assert_no_traceback, cli_env, run_cli
from tests.server import stages
from tests.server.conftest import ROUTES, SENTENCES, make_app

TOKEN = "round-two-token"
SKELETON_ONLY = "name: skeleton_only\nsteps: []\n"
DOCS = {
    "ferry.md": "# Ferry\n\nThe ferry to Ashford leaves the north pier at noon.\nTickets are sold on board.\n",
    "bridge.md": "# Bridge\n\nThe Harbor Bridge was designed by Maria Lopez in 1931.\n",
}


def long_question(chars: int) -> str:
    """Title-case prose (every word a capitalised span), the costly kind for name finding."""
    words = "Who Designed The Harbor Bridge Of Ashford And Which Ferry Leaves The North Pier At Noon "
    return (words * (chars // len(words) + 1))[:chars]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Iterator[tuple[Path, GraphRoute]]:
    """A small group indexed with the default profile (entity graph included), in process."""
    root = tmp_path_factory.mktemp("indexed")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    settings = Settings()
    settings.cache_dir = cache_dir
    gr = GraphRoute(store=str(root / "store"), group="docs", settings=settings)
    gr.index([docs])
    yield root / "store", gr
    gr.close()


# --------------------------------------------------------------------------- 1. unbounded work


def test_1_one_question_length_limit_for_the_cli_the_api_and_http(indexed: tuple[Path, GraphRoute], cache_dir: Path) -> None:
    store, gr = indexed
    over = "Who runs the ferry? " * (DEFAULT_MAX_QUESTION_CHARS // 20 + 1)
    assert len(over) > DEFAULT_MAX_QUESTION_CHARS
    with pytest.raises(QuestionError, match=f"limit is {DEFAULT_MAX_QUESTION_CHARS:,}"):
        gr.query(over, route="route2_local")

    r = run_cli("query", over, "--store", str(store), "--group", "docs", "--route", "route2_local", cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 2 and "GRAPHROUTE_MAX_QUESTION_CHARS" in r.stderr, r.stderr
    assert len(r.stderr) < 1000  # the question is not echoed back

    client = TestClient(make_app(gr, max_body_bytes=100_000))
    h = client.post("/query", json={"question": over, "route": "route2_local"})
    assert h.status_code == 400 and h.json()["error"] == "bad_question", h.text
    assert len(h.content) < 1000

    # the limit is a setting: raised for one process, a longer question goes through
    settings = Settings()
    settings.cache_dir = gr.settings.cache_dir
    settings.max_question_chars = len(over)
    roomy = GraphRoute(store=gr.store, group="docs", settings=settings)
    assert roomy.query(over, route="bm25").answer


def test_1_stage_work_is_bounded_at_the_limit(indexed: tuple[Path, GraphRoute]) -> None:
    """A question at the limit made of capitalised words (every word starts a name span): the
    name finder keeps at most MAX_CANDIDATES names, resolution only looks up word runs as long
    as the group's longest name, and every shipped route answers it."""
    _, gr = indexed
    question = long_question(DEFAULT_MAX_QUESTION_CHARS)
    names = offline_names(question)
    assert 0 < len(names) <= MAX_CANDIDATES
    for route in ("route2_local", "route2_skeleton", "route5_unified", "route1s_sentence", "bm25"):
        result = gr.query(question, route=route)
        assert result.trace, route

    lex = Lexicon(norms=["harbor bridge", "maria lopez", "ashford"])
    lex.norm_ids = {n: f"ent:{n}" for n in lex.norms}
    long_name = " ".join(["harbor bridge of ashford"] * 600)  # 2,400 words
    assert lex.inner_names(long_name, 4) == ["ashford", "harbor bridge"]
    short = "the harbor bridge of maria lopez"
    toks = short.split(" ")
    every_run = {" ".join(toks[a:b]) for a in range(len(toks)) for b in range(a + 1, len(toks) + 1)}
    assert lex.inner_names(short, 4) == sorted(c for c in every_run if c in lex.norm_ids and c != short)


# --------------------------------------------------------------------------- 2. deadline


def test_2_a_timed_out_query_stops_and_frees_its_thread(engine: GraphRoute) -> None:
    """One query thread; a query that would work for 30 s gets its 504 after the 1 s limit and
    stops at its next deadline check, so the next query is answered at once (before: it
    waited behind the first for the 30 s and got a 504 too)."""
    with pytest.raises(QueryTimeoutError):
        engine.query("travel", route="t_spin", timeout_s=0.3)

    client = TestClient(make_app(engine, request_timeout_s=1.0, query_workers=1))
    t = time.monotonic()
    slow = client.post("/query", json={"question": "travel", "route": "t_spin"})
    assert slow.status_code == 504 and slow.json()["error"] == "timeout"
    fast = client.post("/query", json={"question": "travel", "route": "t_route"})
    assert fast.status_code == 200, fast.text
    assert time.monotonic() - t < 20  # not the 30 s the first query would have worked


# --------------------------------------------------------------------------- 3. symlink loops


def test_3_symlink_loops_are_skipped_and_reported(tmp_path: Path, cache_dir: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ferry.md").write_text(DOCS["ferry.md"], encoding="utf-8")
    (docs / "loop_a.md").symlink_to("loop_b.md")
    (docs / "loop_b.md").symlink_to("loop_a.md")
    (docs / "self.txt").symlink_to("self.txt")
    (docs / "up").symlink_to(docs)  # a link to a folder: not followed, so no cycle
    profile = tmp_path / "p.yaml"
    profile.write_text(SKELETON_ONLY, encoding="utf-8")
    r = run_cli("index", str(docs), str(docs / "self.txt"), "--store", str(tmp_path / "s"), "--group", "g",
                "--profile", str(profile), "--json", cache=cache_dir)
    assert_no_traceback(r)
    # the good file is indexed; the loops are reported as files that could not be read
    assert r.returncode == EXIT_FILES_FAILED, r.stderr
    report = json.loads(r.stdout)
    assert report["indexed"] == 1
    loops = {Path(f["path"]).name for f in report["failed"] if "symbolic link loop" in f["reason"]}
    assert loops == {"loop_a.md", "loop_b.md", "self.txt"}, report["failed"]


# --------------------------------------------------------------------------- 4. lost updates


def _indexer(store: GraphStore, settings: Settings, profile: Path) -> Indexer:
    return Indexer(store, "g", registry=build_registry(entry_points=False), settings=settings, profile=str(profile))


def test_4_two_indexers_into_one_group_keep_every_document(tmp_path: Path, settings: Settings) -> None:
    """Two index runs of different folders into one group, each with its own store connection
    (as two processes have): the second, started while the first has read the documents
    record and not yet written, is refused before it reads or writes anything; run once the
    first is done, it adds its documents, and the record ends with every document of both."""
    folders = []
    for part in ("a", "b"):
        folder = tmp_path / part
        folder.mkdir()
        for i in range(12):
            (folder / f"{part}{i}.md").write_text(f"# {part.upper()} {i}\n\nNote {i} of part {part} is kept.\n",
                                                  encoding="utf-8")
        folders.append(folder)
    profile = tmp_path / "p.yaml"
    profile.write_text(SKELETON_ONLY, encoding="utf-8")
    location = str(tmp_path / "store")
    refused: list[BaseException] = []

    def second_run() -> None:
        store = open_store(location, settings=settings)
        try:
            _indexer(store, settings, profile).index_paths([folders[1]])
        except GroupBusyError as exc:
            refused.append(exc)
        finally:
            store.close()

    first = open_store(location, settings=settings)
    write_batches = first.write_batches

    def second_run_before_writing(*args: Any, **kwargs: Any) -> None:
        thread = threading.Thread(target=second_run)
        thread.start()
        thread.join()
        write_batches(*args, **kwargs)

    first.write_batches = second_run_before_writing  # type: ignore[method-assign]
    try:
        assert _indexer(first, settings, profile).index_paths([folders[0]]).indexed == 12
    finally:
        first.close()
    assert len(refused) == 1 and "another index run or delete" in str(refused[0])
    store = open_store(location, settings=settings)
    try:
        assert store.counts("g")["nodes"]["Document"] == 12  # the refused run wrote nothing
        assert _indexer(store, settings, profile).index_paths([folders[1]]).indexed == 12
        documents = store.get_meta("g", DOCUMENTS_META) or {}
        assert len(documents) == 24 == store.counts("g")["nodes"]["Document"]
        again = _indexer(store, settings, profile).index_paths(folders)
        assert (again.indexed, again.unchanged) == (0, 24)
    finally:
        store.close()


# --------------------------------------------------------------------------- 5. index root


def test_5_a_link_inside_an_index_root_cannot_reach_a_file_outside(tmp_path: Path, settings: Settings) -> None:
    root = tmp_path / "allowed"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "ferry.md").write_text(DOCS["ferry.md"], encoding="utf-8")
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe vault code is 7214 and nobody may read it.\n", encoding="utf-8")
    (root / "docs" / "escape.md").symlink_to(outside / "secret.md")
    (root / "link_dir").symlink_to(outside)

    gr = GraphRoute(store=str(tmp_path / "store"), group="g", settings=settings)
    try:
        client = TestClient(make_app(gr, index_roots=[root], max_body_bytes=100_000))
        assert client.post("/index", json={"paths": ["link_dir"], "profile": "default"}).status_code == 403
        assert client.post("/index", json={"paths": ["docs/escape.md"]}).status_code == 403
        job = client.post("/index", json={"paths": ["docs"]}).json()
        for _ in range(600):
            info = client.get(f"/jobs/{job['id']}").json()
            if info["state"] in ("succeeded", "failed"):
                break
            time.sleep(0.2)
        assert info["state"] == "succeeded", info
        report = info["report"]
        assert report["indexed"] == 1
        refused = [f for f in report["failed"] if "outside the allowed folders" in f["reason"]]
        assert [Path(f["path"]).name for f in refused] == ["escape.md"]
        texts = " ".join(str(n.props.get("text", "")) for n in gr.store.iter_nodes("g"))
        assert "ferry" in texts and "vault" not in texts
    finally:
        gr.close()


# --------------------------------------------------------------------------- 6. information exposure


def test_6_health_and_error_bodies_expose_nothing(engine: GraphRoute) -> None:  # the server tests' engine
    client = TestClient(make_app(engine, token=TOKEN, max_body_bytes=2_000_000))
    bare = client.get("/health")
    assert bare.status_code == 200 and bare.json() == {"status": "ok"}
    full = client.get("/health", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert full["groups"] == ["docs"] and full["backend"] == "embedded"
    assert client.get("/health", headers={"Authorization": "Bearer wrong"}).json() == {"status": "ok"}

    auth = {"Authorization": f"Bearer {TOKEN}"}
    bad = client.post("/query", headers=auth, json={"question": "q", "route": "t_route", "overrides": {"overlap.top_k": 0}})
    assert bad.status_code == 400 and bad.json()["message"].startswith("t_route.yaml:")
    assert str(REPO) not in bad.text and "/tmp" not in bad.text and os.sep + "routes" + os.sep not in bad.text

    huge = "x" * 900_000
    r = client.post("/query", headers=auth, json={"question": "q", "nonsense": huge})
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    assert len(r.content) < 2_000, len(r.content)
    r = client.post("/query", headers=auth, json={"question": 12, "route": huge[:200]})
    assert r.status_code == 422 and len(r.content) < 2_000


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GraphRoute]:
    """The server tests' small store and test routes."""
    routes = tmp_path / "routes"
    routes.mkdir()
    for name, text in ROUTES.items():
        (routes / f"{name}.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_ROUTES", str(routes))
    from graphroute.core import Node

    gr = GraphRoute(store=str(tmp_path / "store"), group="docs", registry=build_registry(entry_points=False, extra_plugins=[stages]))
    for doc_id, (title, sents) in SENTENCES.items():
        gr.store.write("docs", [Node(id=f"{doc_id}:s{i}", label="Sentence", group="docs", doc_id=doc_id,
                                     props={"text": s, "document": title}) for i, s in enumerate(sents)])
    yield gr
    gr.close()


# --------------------------------------------------------------------------- 7. booleans


@pytest.mark.parametrize(("text", "value"), [("true", True), ("False", False), ("1", True), ("0", False),
                                              ("yes", True), (" NO ", False), (True, True), (0, False)])
def test_7_booleans_parse_by_one_rule(text: Any, value: bool) -> None:
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", ["maybe", "on", "off", "", "2", "enabled", 2, 0.5, None])
def test_7_anything_else_is_an_error(text: Any) -> None:
    with pytest.raises(BadBooleanError):
        parse_bool(text, "x")


def test_7_string_booleans_in_overrides_mean_what_they_say(engine: GraphRoute) -> None:
    client = TestClient(make_app(engine))
    for off in ("false", "no", "0", False):
        r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": {"answer": {"enabled": off}}})
        # the synthesizer switched off: the route still runs, and its trace says the stage was off
        assert r.status_code == 200, r.text
        assert [t["enabled"] for t in r.json()["trace"] if t["stage"] == "answer"] == [False], off
    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": {"answer.enabled": "maybe"}})
    assert r.status_code == 400 and r.json()["error"] == "bad_boolean", r.text

    assert overrides_from_mapping({"a.enabled": "no"}).enabled == {"a": False}
    assert overrides_from_cli(["a.enabled=no"]).enabled == {"a": False}
    assert overrides_from_env({"GRAPHROUTE__A__ENABLED": "yes"}).enabled == {"a": True}
    for bad in (lambda: overrides_from_cli(["a.enabled=maybe"]), lambda: overrides_from_env({"GRAPHROUTE__A__ENABLED": "maybe"})):
        with pytest.raises(BadBooleanError):
            bad()
    from graphroute.plugins.seeds.entity_seeds import NerSeeds

    with pytest.raises(ValueError, match="must be true/false"):
        NerSeeds.Params(use_llm="on")
    assert NerSeeds.Params(use_llm="no").use_llm is False


def test_7_environment_overrides_warn_about_unknown_ids_and_refuse_bad_booleans(cache_dir: Path) -> None:
    r = run_cli("routes", "show", "bm25", cache=cache_dir, GRAPHROUTE__SCORE_GAPP__THRESHOLD="0.4")
    assert r.returncode == 0 and "score_gapp" in r.stderr and "did you mean 'score_gap'" in r.stderr, r.stderr
    quiet = run_cli("routes", "show", "bm25", cache=cache_dir, GRAPHROUTE__SCORE_GAP__THRESHOLD="0.4")
    assert quiet.returncode == 0 and "score_gap" not in quiet.stderr  # another route's stage: no noise
    r = run_cli("routes", "show", "route2_local", cache=cache_dir, GRAPHROUTE__SCORE_GAP__ENABLED="maybe")
    assert_no_traceback(r)
    assert r.returncode == 2 and "GRAPHROUTE__SCORE_GAP__ENABLED" in r.stderr, r.stderr
    r = run_cli("routes", "show", "bm25", cache=cache_dir, GRAPHROUTE_DEBUG="perhaps")
    assert r.returncode == 2 and "GRAPHROUTE_DEBUG" in r.stderr, r.stderr


# --------------------------------------------------------------------------- 8. exit codes, read-only stores


def unprivileged(cmd: list[str]) -> list[str]:
    """``cmd`` run as a user without write access to other users' files: as `nobody` when the
    tests run as root (root may write anywhere), unchanged otherwise."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop the privilege to write")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user can enter (pytest's tmp_path is private to its owner)."""
    d = Path(tempfile.mkdtemp(prefix="graphroute-ro-"))
    d.chmod(0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    shutil.rmtree(d)


def test_8_user_errors_exit_2(tmp_path: Path, cache_dir: Path, indexed: tuple[Path, GraphRoute]) -> None:
    store, _ = indexed
    a_file = tmp_path / "store-file"
    a_file.write_text("not a store", encoding="utf-8")
    r = run_cli("stats", "--store", str(a_file), cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 2 and "is a file" in r.stderr, r.stderr
    r = run_cli("stats", "--store", str(store), "--group", "nosuch", cache=cache_dir)
    assert r.returncode == 2 and "group 'nosuch' not found" in r.stderr and "docs" in r.stderr, r.stderr
    with pytest.raises(NotFoundError):
        indexed[1].stats("nosuch")


def test_8_an_unwritable_folder_exits_2_and_a_read_only_store_answers_queries(
    open_dir: Path, cache_dir: Path, indexed: tuple[Path, GraphRoute]
) -> None:
    store, gr = indexed
    gr.store.close()  # the module's engine lets go of the files (its later tests reopen)
    ro = open_dir / "store"
    shutil.copytree(store, ro)
    home = open_dir / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    for p in [ro, *ro.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    locked = open_dir / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    env = cli_env(home, HOME=str(home))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(unprivileged([GRAPHROUTE, *args]), capture_output=True, text=True, env=env,
                              timeout=600, cwd=open_dir)

    r = run("index", str(REPO / "examples" / "sample_corpus"), "--store", str(locked / "new"), "--group", "g")
    assert_no_traceback(r)
    assert r.returncode == 2 and "cannot create the store folder" in r.stderr, r.stderr
    r = run("query", "When does the ferry leave?", "--store", str(ro), "--group", "docs", "--route", "bm25", "--json")
    assert_no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert "ferry" in json.loads(r.stdout)["answer"].lower()
    r = run("index", str(REPO / "examples" / "sample_corpus"), "--store", str(ro), "--group", "docs")
    assert_no_traceback(r)
    assert r.returncode == 2 and "read-only" in r.stderr, r.stderr
    gr.store = open_store(str(store), settings=gr.settings)


# --------------------------------------------------------------------------- 10. encodings


def test_10_text_that_is_not_utf8_is_indexed_with_its_encoding_reported(tmp_path: Path, settings: Settings) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = {
        "latin1.txt": ("Le café de la gare ouvre à six heures. Le propriétaire s'appelle François Müller.", "latin-1"),
        "cyrillic.txt": ("Паром отправляется в полдень с северного причала. Билеты продаются на борту.", "cp1251"),
        "utf16.txt": ("The lighthouse keeper logs the weather twice a day.", "utf-16"),
        "plain.txt": ("The canal lock is operated by hand during the night shift.", "utf-8"),
    }
    for name, (text, enc) in texts.items():
        (docs / name).write_bytes(text.encode(enc))
    profile = tmp_path / "p.yaml"
    profile.write_text(SKELETON_ONLY, encoding="utf-8")
    store = open_store(str(tmp_path / "s"), settings=settings)
    try:
        report = _indexer(store, settings, profile).index_paths([docs])
        assert report.failed == [] and report.indexed == 4
        encodings = {Path(k).name: v for k, v in report.to_json()["encodings"].items()}
        assert encodings == {"latin1.txt": "cp1252", "cyrillic.txt": "cp1251", "utf16.txt": "utf-16"}
        stored = " ".join(str(n.props.get("text", "")) for n in store.iter_nodes("g", "Sentence"))
        for text, _ in texts.values():
            assert text.split(". ")[0] in stored
    finally:
        store.close()
    assert decode_text("naïve".encode())[1] == "utf-8"


# --------------------------------------------------------------------------- 11. huge single lines


def test_11_a_long_single_line_is_parsed_in_windows_with_progress(tmp_path: Path, settings: Settings) -> None:
    """A 300,000-character line of prose with no line break: parsed in windows, every part of it
    stored, the parse reporting its progress as it goes."""
    from graphroute.core.lib import progress

    prose = json.loads((Path("/work/shared/datasets/musique/corpus.json")).read_text(encoding="utf-8"))[:60]
    line = " ".join(e["text"].replace("\n", " ") for e in prose)
    while len(line) < 300_000:
        line += " " + line
    line = line[:300_000]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "oneline.txt").write_text(line, encoding="utf-8")
    profile = tmp_path / "p.yaml"
    profile.write_text(SKELETON_ONLY, encoding="utf-8")
    seen: list[tuple[str, float, float | None]] = []
    store = open_store(str(tmp_path / "s"), settings=settings)
    try:
        with progress.listen(lambda step, done, total: seen.append((step, done, total))):
            report = _indexer(store, settings, profile).index_paths([docs])
        assert report.indexed == 1 and report.failed == []
        stored = " ".join(str(n.props["text"]) for n in store.iter_nodes("g", "Sentence"))
        assert line[-200:].split(" ", 1)[1][:100] in stored
    finally:
        store.close()
    parse_steps = [s for s in seen if s[0].startswith("parse")]
    assert len(parse_steps) > 2, seen  # more than a start and an end: progress inside the document

