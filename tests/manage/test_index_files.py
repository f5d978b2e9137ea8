"""What `graphroute index` does with files it cannot use: a type no loader reads is skipped
with a warning (exit 0), a supported file that cannot be read fails and the exit code says
so (4 when others were indexed, 1 when none could be read), and a loader whose optional
dependency is missing names the extra to install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from graphroute.core.apps.cli.main import main
from graphroute.core.errors import EXIT_FILES_FAILED, EXIT_INTERNAL, LoaderError
from graphroute.core.index.files import FOLDER_LINK, collect_files

from tests.indexing.pdfgen import text_ops, write_pdf


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """`graphroute index PATH... --json` in-process into a fresh store, with the skeleton steps only."""
    profile = tmp_path / "lean.yaml"
    profile.write_text(yaml.safe_dump({
        "name": "lean", "steps": [{"use": "sentence_knn", "with": {"threshold": 0.9, "k": 2}}],
    }), encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GRAPHROUTE_PROGRESS", "0")
    monkeypatch.setenv("COLUMNS", "300")

    def invoke(*paths: Path, as_json: bool = True) -> tuple[int, dict | str, str]:
        capsys.readouterr()
        args = ["index", *map(str, paths), "--store", str(tmp_path / "store"), "--group", "g", "--profile", str(profile)]
        try:
            main([*args, "--json"] if as_json else args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return code, json.loads(captured.out) if as_json else captured.out, captured.err

    return invoke


# Root reads any folder (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): as root, the CLI runs with
# those two capabilities dropped, so a folder of mode 000 is as unreadable to it as to a user.
NO_READ_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                    "--inh-caps=-dac_override,-dac_read_search", "--"]


def as_a_user(cmd: list[str]) -> list[str]:
    """``cmd`` run without the power to read a folder its mode forbids."""
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop the capability to read any folder")
    return [*NO_READ_OVERRIDE, *cmd]


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A folder of mode 000 holding a Markdown file; its mode is restored for the cleanup."""
    folder = tmp_path / "docs" / "locked"
    folder.mkdir(parents=True)
    (folder / "other.md").write_text("# Other\n\nThe night ferry leaves the north pier at ten.\n", encoding="utf-8")
    yield folder
    folder.chmod(0o755)


def test_a_folder_that_cannot_be_read_is_failed_and_its_documents_kept(index, tmp_path: Path, locked: Path) -> None:  # type: ignore[no-untyped-def]
    docs = locked.parent
    (docs / "travel.md").write_text("# Travel\n\nThe travel desk approves every trip abroad.\n", encoding="utf-8")
    code, report, _ = index(docs)  # while the folder can be read: both documents
    assert code == 0 and report["indexed"] == 2
    locked.chmod(0)
    probe = subprocess.run(as_a_user([sys.executable, "-c", f"import os; os.listdir({str(locked)!r})"]),
                           capture_output=True, text=True, timeout=60)
    if "PermissionError" not in probe.stderr:
        pytest.skip(f"this process cannot make a folder unreadable to its CLI: {probe.stderr or 'listed it'}")
    env = {**os.environ, "GRAPHROUTE_CACHE": str(tmp_path / "cache"), "GRAPHROUTE_PROGRESS": "0", "COLUMNS": "300"}
    cli = [sys.executable, "-m", "graphroute.core.apps.cli.main", "index", str(docs), "--store", str(tmp_path / "store"),
           "--group", "g", "--profile", str(tmp_path / "lean.yaml")]
    for extra in ([], ["--remove-missing"]):  # gone from the walk, yet not gone: never removed
        r = subprocess.run(as_a_user([*cli, *extra, "--json"]), capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == EXIT_FILES_FAILED, r.stdout + r.stderr
        report = json.loads(r.stdout)
        assert report["failed"] == [{"path": str(locked), "reason": "cannot read folder (Permission denied)"}]
        assert report["unchanged"] == 1 and report["removed"] == 0 and report["documents"] == 2
    inside = [*cli[:4], str(locked / "other.md"), *cli[5:], "--json"]  # a file named below it: failed too
    r = subprocess.run(as_a_user(inside), capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == EXIT_INTERNAL, r.stdout + r.stderr
    assert json.loads(r.stdout)["failed"] == [{"path": str(locked / "other.md"), "reason": "cannot read path (Permission denied)"}]
    r = subprocess.run(as_a_user(cli), capture_output=True, text=True, env=env, timeout=600)  # the human output
    assert r.returncode == EXIT_FILES_FAILED and "failed 1" in r.stdout
    assert f"failed {locked}: cannot read folder (Permission denied)" in " ".join(r.stderr.split())


def test_unsupported_type_is_skipped_with_a_warning(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe ferry leaves at noon every day.\n", encoding="utf-8")
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    code, report, err = index(docs)
    assert code == 0 and report["indexed"] == 1 and report["failed"] == []
    assert [Path(s["path"]).name for s in report["skipped"]] == ["photo.png"]
    assert "warning: skipped" in err and "photo.png" in err  # stderr, with --json as without
    assert "unsupported file type '.png'" in report["skipped"][0]["reason"]
    code, out, err = index(docs, as_json=False)  # the human output: a warning on stderr, still exit 0
    assert code == 0 and "skipped 1" in out
    assert "warning: skipped" in err and "photo.png" in err and "unsupported file type" in err


def test_a_link_to_a_folder_is_not_followed_and_is_said_to_be_skipped(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "far.md").write_text("# Far\n\nThe lighthouse keeper rows out at dawn.\n", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "notes.md").write_text("# Notes\n\nThe ferry leaves at noon every day.\n", encoding="utf-8")
    (docs / "sub" / "linked").symlink_to(elsewhere, target_is_directory=True)
    code, report, _ = index(docs)
    assert code == 0 and report["indexed"] == 1 and report["failed"] == []
    assert report["skipped"] == [{"path": str(docs / "sub" / "linked"), "reason": FOLDER_LINK}]
    code, _out, err = index(docs, as_json=False)
    assert code == 0 and "linked" in err and "links to folders are not followed" in err


def test_a_folder_with_nothing_to_read_is_a_warning(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden.md").write_text("# Hidden\n\nNot read: a hidden file.\n", encoding="utf-8")
    code, report, _ = index(empty)
    assert code == 0 and report["indexed"] == 0 and report["failed"] == []
    assert report["warnings"] == [f"{empty}: no files to index in this folder (hidden files and what .graphrouteignore lists are left out)"]
    code, out, err = index(empty, as_json=False)  # the human output: a warning on stderr
    assert code == 0 and "indexed 0" in out and "warning:" in err and "no files to index" in err
    docs = tmp_path / "docs"  # a folder that holds a document is not warned about
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe ferry leaves at noon every day.\n", encoding="utf-8")
    code, report, _ = index(docs, empty)
    assert code == 0 and report["indexed"] == 1 and len(report["warnings"]) == 1 and str(empty) in report["warnings"][0]


def test_unreadable_files_set_the_exit_code(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nThe lock keeper opens the gates at dawn.\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    code, report, _ = index(good, empty)
    assert code == EXIT_FILES_FAILED == 4  # some files failed, the rest were indexed
    assert report["indexed"] == 1 and [Path(f["path"]).name for f in report["failed"]] == ["empty.txt"]
    code, _, err = index(good, empty, as_json=False)  # good.md is unchanged now: still partial
    assert code == EXIT_FILES_FAILED and "failed" in err and "empty.txt" in err
    code, report, _ = index(empty)
    assert code == EXIT_INTERNAL == 1 and report["indexed"] == report["unchanged"] == 0  # nothing could be read


def test_json_corpus_entries_left_out_are_warnings_naming_them(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    jsonl = docs / "a.jsonl"
    jsonl.write_text('{"title": "Ferry", "text": "The ferry leaves at noon."}\n'
                     '{"title": "Lock", "text": "The lock opens at dawn."}\nnot json\n', encoding="utf-8")
    listed = docs / "b.json"
    listed.write_text(json.dumps([{"title": "Pier", "text": "The pier closes at ten."}, "a bare string", {"text": ""}]),
                      encoding="utf-8")
    code, report, _ = index(docs)
    assert code == 0 and report["failed"] == [] and report["indexed"] == 3
    assert report["warnings"] == [
        f"{jsonl}: invalid JSON (line 3, column 1: Expecting value); left out",
        f"{listed}: entry 1: not a {{title, text}} object but str; left out",
        f"{listed}: entry 2: empty 'text'; left out",
    ]
    code, _, err = index(docs, as_json=False)  # the human output: a warning on stderr each
    assert code == 0 and "warning:" in err and "line 3, column 1" in err and "entry 2: empty 'text'" in err


def test_missing_optional_dependency_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphroute.plugins.loaders.pdf import PdfLoader

    pdf = tmp_path / "a.pdf"
    write_pdf(pdf, [text_ops([(72, 700, 12, "The pier opens at nine.")])])
    assert list(PdfLoader().load(pdf))  # with pdfplumber installed it loads
    monkeypatch.setitem(sys.modules, "pdfplumber", None)  # an import of it now fails, as when not installed
    with pytest.raises(LoaderError) as info:
        list(PdfLoader().load(pdf))
    assert 'pip install "graphroute[pdf]"' in str(info.value) and "pdfplumber" in str(info.value)


IGNORE = """\
# not documents
drafts/
*.log
/top-only.md
notes/private/*.md
assets/**/*.md
"""


def test_graphrouteignore_lines_are_read_as_gitignore_reads_them(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    kept = ["a.md", "drafts.md", "keep.log", "notes/drafts", "notes/n.md", "notes/private/deeper/q.md",
            "sub/run.log", "sub/top-only.md"]
    dropped = ["assets/a/b/c.md", "assets/top.md", "drafts/x.md", "notes/private/p.md", "run.log",
               "sub/drafts/y.md", "top-only.md"]
    for i, rel in enumerate(kept + dropped):
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(f"# Note {i}\n\nThe ferry number {i} leaves the pier at noon.\n", encoding="utf-8")
    (docs / ".graphrouteignore").write_text(IGNORE + "!keep.log\n", encoding="utf-8")
    (docs / "sub" / ".graphrouteignore").write_text("!run.log\n", encoding="utf-8")  # a deeper file wins
    files, failed = collect_files([docs])
    assert failed == []
    assert [f.relative_to(docs).as_posix() for f in files] == sorted(kept)
    assert collect_files([docs / "drafts" / "x.md"])[0] == [docs / "drafts" / "x.md"]  # named: always read
    code, report, _ = index(docs)  # the index run reads the same files: no loader reads three
    skipped = [Path(s["path"]).relative_to(docs).as_posix() for s in report["skipped"]]
    assert code == 0 and skipped == ["keep.log", "notes/drafts", "sub/run.log"]
    assert report["documents"] == len(kept) - len(skipped)


def test_a_graphrouteignore_that_cannot_be_read_fails_its_folder(tmp_path: Path) -> None:
    guarded = tmp_path / "docs" / "guarded"
    guarded.mkdir(parents=True)
    (guarded / "secret.md").write_text("# Secret\n\nThe vault code is written nowhere.\n", encoding="utf-8")
    ignore = guarded / ".graphrouteignore"
    ignore.write_text("secret.md\n", encoding="utf-8")
    ignore.chmod(0)
    probe = subprocess.run(as_a_user([sys.executable, "-c", f"open({str(ignore)!r}).read()"]),
                           capture_output=True, text=True, timeout=60)
    if "PermissionError" not in probe.stderr:
        pytest.skip(f"this process cannot make a file unreadable to its CLI: {probe.stderr or 'read it'}")
    code = (f"import json; from pathlib import Path; from graphroute.core.index.files import collect_files; "
            f"print(json.dumps(collect_files([Path({str(guarded.parent)!r})])[1]))")
    r = subprocess.run(as_a_user([sys.executable, "-c", code]), capture_output=True, text=True, timeout=60)
    assert json.loads(r.stdout) == [{"path": str(ignore), "reason": "cannot read file (Permission denied); its folder was not read"}], r.stderr


def test_a_file_gone_from_an_indexed_folder_is_said_to_stay(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ferry.md").write_text("# Ferry\n\nThe ferry leaves at noon every day.\n", encoding="utf-8")
    (docs / "tram.md").write_text("# Tram\n\nThe tram runs every ten minutes.\n", encoding="utf-8")
    code, report, _ = index(docs)
    assert code == 0 and report["indexed"] == 2 and report["warnings"] == []
    (docs / "tram.md").unlink()
    code, report, _ = index(docs)
    assert code == 0 and report["removed"] == 0 and report["documents"] == 2
    assert report["warnings"] == ["1 document of this group came from files under these folders that are gone; "
                                  "they stay in the group (--remove-missing removes them)"]
