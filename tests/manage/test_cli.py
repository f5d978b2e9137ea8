"""`graphroute groups`, `documents` and `delete` through the console entry point, and the
confirmation prompt on a real terminal (a pseudo-terminal)."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from graphroute.core.apps.cli.main import main
from graphroute.core.engine import GraphRoute

GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")


@pytest.fixture
def run(indexed: GraphRoute, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """The console entry point in-process (its error mapping included): exit code, stdout, stderr."""
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(indexed.settings.cache_dir))
    monkeypatch.setenv("COLUMNS", "200")
    indexed.close()  # the CLI opens the store itself
    store = indexed.settings.store

    def invoke(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main([*args, "--store", store])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def test_groups_and_documents(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("groups", "--json")
    assert code == 0
    assert json.loads(out)["groups"] == [
        {"group": "g", "documents": 3, "sentences": 6}, {"group": "h", "documents": 1, "sentences": 2},
    ]
    code, out, _ = run("groups")
    assert code == 0 and "g" in out and "documents" in out and not out.lstrip().startswith("{")
    code, out, _ = run("documents", "--group", "g", "--json")
    docs = json.loads(out)["documents"]
    assert code == 0 and [d["title"] for d in docs] == ["Harbour", "Lighthouse", "Orchard"]
    assert set(docs[0]) == {"id", "title", "path", "content_hash", "indexed_at", "sentences"}
    code, out, _ = run("documents", "--group", "g")
    assert code == 0 and "Lighthouse" in out and "indexed at" in out
    code, _, err = run("documents", "--group", "nope")
    assert code == 2 and "group 'nope' not found" in err and "g, h" in err
    assert "a group exists once documents are indexed into it" in " ".join(err.split())
    # every command that names a group refuses one the store lacks, listing those it holds
    for command in (["query", "Who keeps the lighthouse?"], ["upgrade"], ["stats"]):
        code, _, err = run(*command, "--group", "nope")
        assert code == 2 and "group 'nope' not found" in err and "(groups: g, h)" in err, (command, err)


def test_delete_refuses_without_yes_off_a_terminal(run) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run("delete", "--group", "g", "--document", "Lighthouse")
    assert code == 2 and "pass --yes" in err and "Lighthouse" in err
    code, _, err = run("delete", "--group", "h")
    assert code == 2 and "whole group 'h'" in err
    _, out, _ = run("groups", "--json")
    assert [g["documents"] for g in json.loads(out)["groups"]] == [3, 1]  # nothing deleted


def test_delete_with_yes(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("delete", "--group", "g", "--document", "Lighthouse", "--yes")
    assert code == 0 and "deleted 1 document from group g; 2 documents and " in out
    _, out, _ = run("documents", "--group", "g", "--json")
    assert [d["title"] for d in json.loads(out)["documents"]] == ["Harbour", "Orchard"]
    code, out, _ = run("delete", "--group", "h", "--yes", "--json")
    assert code == 0 and json.loads(out) == {"group": "h", "deleted_group": True, "documents": 1}
    code, _, err = run("delete", "--group", "g", "--document", "Lighthouse", "--yes")
    assert code == 2 and "no document 'Lighthouse'" in err


def _on_terminal(args: list[str], answer: str, env: dict[str, str]) -> tuple[int, str]:
    """Run the real command with a pseudo-terminal as stdin/stdout, answer its prompt."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120
    answered = False
    while proc.poll() is None or not answered:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the command exited and closed the terminal
            break
        seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(leader, answer.encode() + b"\n")
            answered = True
    proc.wait(timeout=60)
    os.close(leader)
    return proc.returncode, re.sub(r"\x1b\[[0-9;]*m", "", seen.decode(errors="replace"))  # no styles


def test_delete_asks_on_a_terminal(indexed: GraphRoute) -> None:
    store = indexed.settings.store
    indexed.close()
    env = {**os.environ, "GRAPHROUTE_CACHE": str(indexed.settings.cache_dir), "GRAPHROUTE_PROGRESS": "0"}
    code, text = _on_terminal([GRAPHROUTE, "delete", "--group", "h", "--store", store], "n", env)
    assert code == 1 and "Delete the whole group 'h'" in text and "nothing deleted" in text
    code, text = _on_terminal([GRAPHROUTE, "delete", "--group", "h", "--store", store], "y", env)
    assert code == 0 and "deleted group h" in text
    gr = GraphRoute(store=store)
    assert [r["group"] for r in gr.groups()] == ["g"]
    gr.close()


def test_stats_prints_a_table_or_json_and_refuses_an_unknown_group(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("stats", "--group", "g")
    assert code == 0 and "nodes:Sentence" in out and "index:" in out  # the step report is in the table
    assert "{" not in out and '"' not in out  # no JSON after the table
    code, out, _ = run("stats", "--group", "g", "--json")
    data = json.loads(out)  # nothing but JSON
    assert code == 0 and data["group"] == "g" and data["nodes"]["Sentence"] == 6 and data["index"]
    code, out, err = run("stats", "--group", "nope")
    assert code == 2 and out == "" and "group 'nope' not found" in err and "g, h" in err


def test_index_refuses_a_new_group_name_a_url_cannot_hold(run, indexed: GraphRoute, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    harbour = tmp_path / "corpus" / "harbour.md"
    for bad in ("a/b", "  ", "..", "x\\y"):
        code, out, err = run("index", str(harbour), "--group", bad)
        assert code == 2 and "group name" in err and "Traceback" not in err, (bad, err)
    _, out, _ = run("groups", "--json")
    assert [g["group"] for g in json.loads(out)["groups"]] == ["g", "h"]

    # a group a store already holds keeps its name: it is still indexed into, listed and deleted
    gr = GraphRoute(settings=indexed.settings, group="old/odd")
    gr.index([harbour])
    gr.close()
    code, _, err = run("index", str(harbour), "--group", "old/odd")
    assert code == 0, err
    code, out, _ = run("documents", "--group", "old/odd", "--json")
    assert code == 0 and [d["title"] for d in json.loads(out)["documents"]] == ["Harbour"]
    code, _, err = run("delete", "--group", "old/odd", "--yes")
    assert code == 0, err


READ_ONLY_COMMANDS = [
    ("groups",), ("documents", "--group", "g"), ("stats", "--group", "g"), ("upgrade", "--group", "g"),
    ("query", "When does the ferry leave?", "--group", "g", "--route", "bm25"), ("delete", "--group", "g", "--yes"),
]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=lambda c: c[0])
def test_a_command_that_reads_never_creates_a_store(
    command: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "300")
    empty = tmp_path / "empty"
    empty.mkdir()  # a folder that exists but holds no store (a wrong --store): left as it is
    for store in (tmp_path / "typo", empty):
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            main([*command, "--store", str(store)])
        err = " ".join(capsys.readouterr().err.split())
        assert info.value.code == 2, err
        assert f"no store at {store}; index documents into it first" in err and "--store" in err
    assert not (tmp_path / "typo").exists() and list(empty.iterdir()) == []


def test_index_and_the_python_api_still_create_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from graphroute.core.errors import StoreLocationError

    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    doc = tmp_path / "ferry.md"
    doc.write_text("# Ferry\n\nThe ferry leaves the north pier at noon.\n", encoding="utf-8")
    profile = tmp_path / "lean.yaml"
    profile.write_text("name: lean\nsteps: []\n", encoding="utf-8")
    main(["index", str(doc), "--store", str(tmp_path / "new"), "--group", "g", "--profile", str(profile), "--json"])
    assert json.loads(capsys.readouterr().out)["indexed"] == 1
    main(["groups", "--store", str(tmp_path / "new"), "--json"])  # now there is one to read
    assert [g["group"] for g in json.loads(capsys.readouterr().out)["groups"]] == ["g"]
    GraphRoute(store=str(tmp_path / "api")).close()  # the Python API creates, as before
    assert (tmp_path / "api" / "graph.sqlite").is_file()
    with pytest.raises(StoreLocationError, match="no store at"):
        GraphRoute(store=str(tmp_path / "api2"), create=False)
    assert not (tmp_path / "api2").exists()


def _read_only_mount(store: str) -> list[str] | None:
    """A command prefix that runs its command with ``store`` bind-mounted read-only (a user
    and mount namespace of its own: the store is really unwritable, for root too), or None
    where this system allows no such namespace."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
              'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh", store]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    return prefix if probe.returncode == 0 else None


def test_delete_on_a_read_only_store_says_deleting_failed(indexed: GraphRoute) -> None:
    store = indexed.settings.store
    doc = next(d["id"] for d in indexed.documents("g") if d["title"] == "Lighthouse")
    indexed.close()
    prefix = _read_only_mount(store)
    if prefix is None:
        pytest.skip("no user and mount namespaces here: cannot make the store read-only")
    env = {**os.environ, "GRAPHROUTE_CACHE": str(indexed.settings.cache_dir), "GRAPHROUTE_PROGRESS": "0",
           "COLUMNS": "300"}
    for args in (["--group", "g", "--document", doc], ["--group", "h"]):
        r = subprocess.run([*prefix, GRAPHROUTE, "delete", *args, "--yes", "--store", store],
                           capture_output=True, text=True, env=env, timeout=300)
        err = " ".join(r.stderr.split())
        assert r.returncode == 2 and "Traceback" not in err, err
        assert "read-only" in err and "not deleted from" in err and "indexed" not in err, err
    r = subprocess.run([*prefix, GRAPHROUTE, "index", str(Path(store).parent / "corpus"), "--group", "g",
                        "--store", store], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "not indexed into" in " ".join(r.stderr.split()), r.stderr
    write = "from graphroute.plugins.stores.embedded import EmbeddedStore; EmbeddedStore(sys.argv[1]).set_meta('g', 'k', 1)"
    r = subprocess.run([*prefix, sys.executable, "-c", f"import sys; {write}", store],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and (
        f"StoreLocationError: store {store!r} is read-only for this process (its folder or database file cannot be "
        "written); it can be queried, not changed"
    ) in r.stderr, r.stderr
    gr = GraphRoute(store=store)  # nothing was deleted
    assert [(g["group"], g["documents"]) for g in gr.groups()] == [("g", 3), ("h", 1)]
    gr.close()


def test_stats_shows_an_empty_list_as_none(run) -> None:  # type: ignore[no-untyped-def]
    # a blank `index:failed` cell read as "unknown" next to the JSON's []
    code, out, _ = run("stats", "--group", "g")
    assert code == 0
    rows = {cells[0]: cells[1] for line in out.splitlines()
            if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 2}
    assert rows["index:failed"] == "none" and rows["index:skipped"] == "none", rows
    assert rows["index:indexed"] == "3"
