"""Ctrl+C (SIGINT) during ``graphroute index`` and ``graphroute query``: exit code 130, a line
on stderr that says the command was interrupted (and, for an index run, that what it wrote
stays and how to finish), no traceback; an index run interrupted between two index steps is
finished by the next run of the same input, with exactly the counts of a run that was never
interrupted.

The runs are held at a known point by the pause plugin (``pause_plugin.py``) and interrupted
there, so the test does not depend on how long a real step takes on a busy machine.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

from graphroute.core.config.settings import Settings

from tests.reliability.conftest import PAUSE_PLUGIN, REPO, assert_no_traceback, run_cli, when_paused
from tests.reliability.test_faults import assert_consistent, counts

SAMPLE = REPO / "examples" / "sample_corpus"
PLUGIN = PAUSE_PLUGIN


def paused_profile(folder: Path) -> Path:
    """The default profile with a pause between the entity graph and the steps after it."""
    text = (REPO / "routes" / "index" / "default.yaml").read_text(encoding="utf-8")
    anchor = "  - use: entity_graph\n    with: {extractor: spacy}\n"
    assert anchor in text
    path = folder / "paused.yaml"
    path.write_text(text.replace(anchor, anchor + "  - use: t_pause_step\n"), encoding="utf-8")
    return path


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_when_paused(args: list[str], marker: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """Run ``graphroute ARGS`` with the pause plugin, send SIGINT once it pauses."""
    # a terminal's Ctrl+C reaches a process whose SIGINT is not ignored; a test run started in
    # the background of a shell without job control (CI, nohup ... &) hands its children SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler: restore the default
    return when_paused(args, marker, cache, lambda proc: proc.send_signal(signal.SIGINT), preexec_fn=_default_sigint)


def test_ctrl_c_during_index_says_so_and_the_next_run_finishes(tmp_path: Path, settings: Settings, cache_dir: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("property_management_agreement.md", "appliance_warranty.txt"):
        shutil.copy(SAMPLE / name, docs / name)
    profile = paused_profile(tmp_path)
    store = tmp_path / "store"
    where = ["--store", str(store), "--group", "g", "--profile", str(profile)]
    first = run_cli("index", str(docs), *where, cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)
    assert first.returncode == 0, first.stderr
    reference = tmp_path / "reference"
    shutil.copytree(store, reference)

    shutil.copy(SAMPLE / "invoice_hv_2024_017.html", docs / "invoice_hv_2024_017.html")
    r = interrupt_when_paused(["index", str(docs), *where], tmp_path / "paused", cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 130, r.stdout + r.stderr
    assert "interrupted" in r.stderr and "run the same `graphroute index` again to finish" in r.stderr, r.stderr

    assert_consistent(store, "g")  # the new document is whole, and queryable
    assert counts(store, "g")["nodes"]["Document"] == 3
    unfinished = "the last index run into group 'g' has not finished its index steps"
    query = run_cli("query", "Who pays for repairs?", "--store", str(store), "--group", "g", cache=cache_dir)
    assert query.returncode == 0, query.stderr
    assert unfinished in query.stderr and "run the same `graphroute index` again" in query.stderr, query.stderr
    stats = run_cli("stats", "--store", str(store), "--group", "g", "--json", cache=cache_dir)
    assert stats.returncode == 0 and json.loads(stats.stdout)["unfinished_run"] is True, stats.stdout
    assert unfinished in stats.stderr, stats.stderr

    rerun = run_cli("index", str(docs), *where, cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)
    assert rerun.returncode == 0, rerun.stderr
    uninterrupted = run_cli("index", str(docs), "--store", str(reference), "--group", "g", "--profile", str(profile),
                            cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    assert counts(store, "g") == counts(reference, "g")
    assert_consistent(store, "g")
    stats = run_cli("stats", "--store", str(store), "--group", "g", "--json", cache=cache_dir)
    assert json.loads(stats.stdout)["unfinished_run"] is False and "warning" not in stats.stderr, stats.stderr


def test_an_interrupted_document_delete_is_finished_by_the_same_delete(
    tmp_path: Path, settings: Settings, cache_dir: Path
) -> None:
    """Ctrl+C in a document delete's index steps leaves the document gone and its derived
    layers not yet updated; running the same delete again finishes them (the document is no
    longer found, the group's run is unfinished), deletes nothing else, asks no confirmation,
    and leaves the group as a delete that was never interrupted does."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("property_management_agreement.md", "appliance_warranty.txt", "invoice_hv_2024_017.html"):
        shutil.copy(SAMPLE / name, docs / name)
    store, reference = tmp_path / "store", tmp_path / "reference"
    where = ["--group", "g", "--profile", str(paused_profile(tmp_path))]
    first = run_cli("index", str(docs), "--store", str(store), *where, cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)
    assert first.returncode == 0, first.stderr
    shutil.copytree(store, reference)
    gone = str(docs / "appliance_warranty.txt")
    delete = ["delete", "--group", "g", "--document", gone, "--yes"]
    whole = run_cli(*delete, "--store", str(reference), cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)
    assert whole.returncode == 0, whole.stderr

    r = interrupt_when_paused([*delete, "--store", str(store)], tmp_path / "paused", cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 130 and "run the same `graphroute delete` again to finish" in r.stderr, r.stderr
    stats = run_cli("stats", "--store", str(store), "--group", "g", "--json", cache=cache_dir)
    assert json.loads(stats.stdout)["unfinished_run"] is True, stats.stdout

    again = run_cli(*delete[:-1], "--store", str(store), cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)  # no --yes
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stderr.split())
    assert f"no document {gone!r}" in said and "finished now" in said, again.stderr
    assert counts(store, "g") == counts(reference, "g")
    assert counts(store, "g")["nodes"]["Document"] == 2
    assert_consistent(store, "g")
    stats = run_cli("stats", "--store", str(store), "--group", "g", "--json", cache=cache_dir)
    assert json.loads(stats.stdout)["unfinished_run"] is False, stats.stdout

    typo = run_cli(*delete, "--store", str(store), cache=cache_dir, GRAPHROUTE_PLUGINS=PLUGIN)
    assert typo.returncode == 2 and f"no document {gone!r}" in " ".join(typo.stderr.split()), typo.stderr  # complete


def test_ctrl_c_during_query_says_so_without_a_traceback(tmp_path: Path, settings: Settings, cache_dir: Path) -> None:
    store = tmp_path / "store"
    assert run_cli("index", str(SAMPLE), "--store", str(store), "--group", "g", cache=cache_dir).returncode == 0
    routes = tmp_path / "routes"
    routes.mkdir()
    # the pause in one branch of a parallel block: the interrupt lands in a branch's task,
    # which the query's own task awaits
    (routes / "t_paused.yaml").write_text(
        "name: t_paused\nstages:\n  - id: retrieve\n    merge: union\n    parallel:\n"
        "      - - use: bm25\n        - use: t_pause\n      - - use: bm25\n          id: other_bm25\n"
        "  - use: token_budget\n  - use: extractive\n",
        encoding="utf-8",
    )
    r = interrupt_when_paused(
        ["query", "Who pays for repairs?", "--route", str(routes / "t_paused.yaml"), "--store", str(store), "--group", "g"],
        tmp_path / "paused", cache_dir,
    )
    assert_no_traceback(r)
    assert "never retrieved" not in r.stderr, r.stderr
    assert r.returncode == 130, r.stdout + r.stderr
    assert r.stderr.strip() == "interrupted", r.stderr
