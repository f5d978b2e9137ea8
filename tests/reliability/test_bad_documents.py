"""Bad documents through the real ``graphroute index``: every bad file is reported by name
with a reason, the rest of the batch is indexed, documents indexed earlier survive, and the
exit code is non-zero only when nothing at all could be indexed.

The batch holds an empty file, binary bytes, random bytes without NULs (text in no
encoding), a truncated PDF, a PDF without a text layer, a 20 MB text (over the profile's 8 MB limit here: indexing 20 MB
of prose with spaCy takes minutes, so the full-size run under the default 50 MB limit is in
the load suite, tests/reliability/test_load.py); and valid but awkward files: 5,000 nested
``<div>`` s, a million-character single line, latin-1 and UTF-16 text (indexed, their
encodings in the report).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import yaml
from graphroute.core.engine import open_store
from graphroute.core.errors import EXIT_FILES_FAILED

from tests.indexing.pdfgen import text_ops, write_pdf
from tests.reliability.conftest import REPO, assert_no_traceback, run_cli

GOOD = {
    "pumps.md": "# Pump Station Manual\n\n## Maintenance\n\nThe north pump station is inspected every March by the "
                "river authority. Worn impellers are replaced before the summer season starts.\n\n## Staffing\n\n"
                "Two engineers are on call at the pump station during flood warnings.\n",
    "bridge.txt": "Harbor bridge notes\n\nThe harbor bridge opens for ships taller than twelve metres. "
                  "Openings are announced on the radio ten minutes in advance.\n",
}
NEW_GOOD = {
    "ferry.html": "<html><head><title>Ferry timetable</title></head><body><h2>Winter</h2>"
                  "<p>The ferry to the island leaves every two hours in winter.</p>"
                  "<p>Bicycles travel free of charge on the first ferry of the day.</p></body></html>",
}
DEEPEST = "The deepest paragraph explains how the pressure valve in the cellar is serviced."


LONG_HEAD = "The firmware image of the pump controller is embedded below as one base64 block. "


def _long_line(chars: int) -> str:
    """One line of ``chars`` characters without a newline: a sentence, then a base64-like
    blob (an export with an inlined image). Prose of this length is in the load suite: spaCy
    needs minutes for a million characters of sentences on this machine."""
    rnd = random.Random(13)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return LONG_HEAD + "".join(rnd.choice(alphabet) for _ in range(chars - len(LONG_HEAD)))


def write_bad_files(folder: Path) -> dict[str, str]:
    """Write the bad files; returns file name -> expected words of its reason."""
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.md").write_bytes(bytes(random.Random(1).randrange(256) for _ in range(4096)) + b"\x00\x00")
    pdf = write_pdf(folder / "whole.pdf", [text_ops([(72, 700, 12, "The turbine is inspected every spring."),
                                                     (72, 680, 12, "Blades are replaced after ten years.")])])
    raw = pdf.read_bytes()
    pdf.unlink()
    (folder / "truncated.pdf").write_bytes(raw[: len(raw) // 2])
    write_pdf(folder / "scanned.pdf", ["0 0 1 rg 72 72 200 300 re f\n0 0 0 RG 72 400 m 400 400 l S"])
    rng = random.Random(2)
    (folder / "garbled.txt").write_bytes(bytes(rng.randrange(1, 256) for _ in range(4096)))
    with (folder / "big.txt").open("w", encoding="utf-8") as f:
        line = "The canal lock is operated by hand during the night shift. " * 16 + "\n\n"
        for _ in range(20 * 1024 * 1024 // len(line) + 1):
            f.write(line)
    (folder / "notes.xyz").write_text("not a supported type", encoding="utf-8")
    return {
        "empty.txt": "empty file",
        "binary.md": "binary file",
        "truncated.pdf": "unreadable PDF",
        "scanned.pdf": "no text layer",
        "garbled.txt": "not text in any encoding",
        "big.txt": "over the limit of 8 MB",
        "notes.xyz": "unsupported file type",
    }


LATIN1 = "Caf\u00e9 cr\u00e8me: the kiosk sells coffee on the pier every day."
UTF16 = "The lighthouse keeper logs the weather twice a day."


def write_hard_but_valid(folder: Path) -> None:
    """Files that are awkward but legitimate: they must be indexed, not refused."""
    depth = 5000
    html = ("<div>" * depth) + f"<p>{DEEPEST}</p>" + ("</div>" * depth)
    (folder / "nested.html").write_text(f"<html><head><title>Cellar notes</title></head><body>{html}</body></html>",
                                        encoding="utf-8")
    line = _long_line(1_000_000)
    assert len(line) == 1_000_000 and "\n" not in line
    (folder / "longline.txt").write_text(line, encoding="utf-8")
    (folder / "latin1.txt").write_bytes(LATIN1.encode("latin-1"))
    (folder / "utf16.txt").write_bytes(UTF16.encode("utf-16"))


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default profile with an 8 MB file limit and only the skeleton steps (speed)."""
    p = tmp_path_factory.mktemp("profile") / "small_files.yaml"
    p.write_text(yaml.safe_dump({
        "name": "small_files", "parse": {"max_file_mb": 8},
        "steps": [{"use": "sentence_knn", "with": {"threshold": 0.9, "k": 2}},
                  {"use": "section_similarity", "with": {"threshold": 0.43, "max_edges": 5}}],
    }), encoding="utf-8")
    return p


def sentences_by_title(store_dir: Path, group: str) -> dict[str, list[str]]:
    store = open_store(str(store_dir))
    try:
        titles = {n.id: n.props["title"] for n in store.iter_nodes(group, "Document")}
        out: dict[str, list[str]] = {t: [] for t in titles.values()}
        for n in store.iter_nodes(group, "Sentence"):
            out[titles[n.doc_id]].append(n.props["text"])
        return {t: sorted(s) for t, s in out.items()}
    finally:
        store.close()


def test_bad_files_reported_rest_indexed_nothing_lost(tmp_path: Path, cache_dir: Path, profile: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in GOOD.items():
        (docs / name).write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    common = ["--store", str(store), "--group", "g", "--profile", str(profile)]

    first = run_cli("index", str(docs), *common, "--json", cache=cache_dir)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["indexed"] == 2
    before = sentences_by_title(store, "g")
    assert set(before) == {"Pump Station Manual", "Harbor bridge notes"} and all(before.values())

    for name, text in NEW_GOOD.items():
        (docs / name).write_text(text, encoding="utf-8")
    expected = write_bad_files(docs)
    write_hard_but_valid(docs)

    second = run_cli("index", str(docs), *common, "--json", cache=cache_dir, timeout=900)
    assert_no_traceback(second)
    assert second.returncode == EXIT_FILES_FAILED, second.stderr  # some files failed, the rest indexed
    report = json.loads(second.stdout)
    reasons = {Path(f["path"]).name: f["reason"] for f in report["failed"] + report["skipped"]}
    assert set(reasons) == set(expected), reasons
    assert [Path(f["path"]).name for f in report["skipped"]] == ["notes.xyz"]  # not a failure
    for name, words in expected.items():
        assert words in reasons[name], (name, reasons[name])
    # ferry, nested, longline, latin1, utf16 are new; pumps and bridge are unchanged and kept
    assert (report["indexed"], report["unchanged"]) == (5, 2), report
    encodings = {Path(p).name: enc for p, enc in report["encodings"].items()}
    assert encodings == {"latin1.txt": "cp1252", "utf16.txt": "utf-16"}, encodings

    after = sentences_by_title(store, "g")
    for title, sents in before.items():
        assert after[title] == sents, f"{title} changed or lost"
    assert DEEPEST in after["Cellar notes"]
    assert after["latin1"] == [LATIN1] and after["utf16"] == [UTF16]
    assert "The ferry to the island leaves every two hours in winter." in after["Ferry timetable"]
    long_text = " ".join(after["longline"])
    assert LONG_HEAD.strip() in long_text and len(long_text) >= 999_000  # stored whole, not cut off

    # a run where nothing can be indexed fails (exit 1), names every file, loses nothing
    only_bad = [str(docs / n) for n in expected]
    third = run_cli("index", *only_bad, *common, cache=cache_dir, COLUMNS="1000")
    assert_no_traceback(third)
    assert third.returncode == 1, (third.stdout, third.stderr)
    for name, words in expected.items():
        line = next((ln for ln in third.stderr.splitlines() if name in ln), "")
        assert words in line, (name, third.stderr)
    assert sentences_by_title(store, "g") == after


def test_all_bad_through_a_fresh_store_exits_1_and_keeps_store_empty(tmp_path: Path, cache_dir: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes(b"\xff\xfe\x00\x00garbage")
    r = run_cli("index", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), str(tmp_path / "missing.md"),
                "--store", str(tmp_path / "s"), "--group", "g", "--json", cache=cache_dir)
    assert_no_traceback(r)
    assert r.returncode == 1, (r.stdout, r.stderr)
    failed = {Path(f["path"]).name: f["reason"] for f in json.loads(r.stdout)["failed"]}
    assert set(failed) == {"a.txt", "b.txt", "missing.md"}
    assert "no such file" in failed["missing.md"]
    store = open_store(str(tmp_path / "s"))
    try:
        assert store.counts("g")["nodes"] == {}
    finally:
        store.close()


def test_a_missing_loader_extra_is_named_as_typed(tmp_path: Path, cache_dir: Path) -> None:
    """Without its optional dependency an HTML file fails with the command that installs it,
    and the console prints that command as written: ``graphroute[html]`` is not taken for
    console markup (nor is a folder name in brackets)."""
    shim = tmp_path / "shim" / "bs4"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("beautifulsoup4 is not installed in this test")\n')
    docs = tmp_path / "docs[html]"
    docs.mkdir()
    (docs / "ferry.html").write_text(NEW_GOOD["ferry.html"], encoding="utf-8")
    r = run_cli("index", str(docs), "--store", str(tmp_path / "s"), "--group", "g", cache=cache_dir,
                PYTHONPATH=f"{shim.parent}{os.pathsep}{REPO}", COLUMNS="1000")
    assert_no_traceback(r)
    assert r.returncode == 1, (r.stdout, r.stderr)
    line = next(ln for ln in r.stderr.splitlines() if "ferry.html" in ln)
    assert f"{docs / 'ferry.html'}:" in line and 'pip install "graphroute[html]"' in line, line
