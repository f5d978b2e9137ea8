"""What `graphroute index` does with files it cannot use: a type no loader reads is skipped
with a warning (exit 0), a supported file that cannot be read fails and the exit code says
so (4 when others were indexed, 1 when none could be read), and a loader whose optional
dependency is missing names the extra to install."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from graphroute.core.apps.cli.main import main
from graphroute.core.errors import EXIT_FILES_FAILED, EXIT_INTERNAL, LoaderError

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


def test_unsupported_type_is_skipped_with_a_warning(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nThe ferry leaves at noon every day.\n", encoding="utf-8")
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    code, report, err = index(docs)
    assert code == 0 and report["indexed"] == 1 and report["failed"] == []
    assert [Path(s["path"]).name for s in report["skipped"]] == ["photo.png"]
    assert "unsupported file type '.png'" in report["skipped"][0]["reason"]
    code, out, err = index(docs, as_json=False)  # the human output: a warning on stderr, still exit 0
    assert code == 0 and "skipped 1" in out
    assert "warning: skipped" in err and "photo.png" in err and "unsupported file type" in err


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


def test_missing_optional_dependency_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphroute.plugins.loaders.pdf import PdfLoader

    pdf = tmp_path / "a.pdf"
    write_pdf(pdf, [text_ops([(72, 700, 12, "The pier opens at nine.")])])
    assert list(PdfLoader().load(pdf))  # with pdfplumber installed it loads
    monkeypatch.setitem(sys.modules, "pdfplumber", None)  # an import of it now fails, as when not installed
    with pytest.raises(LoaderError) as info:
        list(PdfLoader().load(pdf))
    assert 'pip install "graphroute[pdf]"' in str(info.value) and "pdfplumber" in str(info.value)
