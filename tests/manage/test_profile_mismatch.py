"""An index run that would parse or embed only part of a group with other settings than the
rest was (another index profile) is refused before it writes anything; the same profile over
all of the group's documents goes through."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from graphroute.core.api.constants import FINGERPRINT_META, INDEX_PROFILE_META
from graphroute.core.apps.cli.main import main
from graphroute.core.engine import GraphRoute

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"


def _profile(path: Path, **parse: str) -> Path:
    body: dict[str, object] = {"name": path.stem, "steps": [{"use": "sentence_knn", "with": {"threshold": 0.9, "k": 2}}]}
    if parse:
        body["parse"] = parse
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def test_a_run_over_part_of_a_group_with_another_profile_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GRAPHROUTE_PROGRESS", "0")
    monkeypatch.setenv("COLUMNS", "300")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("property_management_agreement.md", "appliance_warranty.txt"):
        shutil.copy(SAMPLE / name, docs / name)
    split, pack = _profile(tmp_path / "split.yaml"), _profile(tmp_path / "pack.yaml", chunk_sections="pack")
    store = str(tmp_path / "store")

    def index(*args: str) -> int:
        try:
            main(["index", *args, "--store", store, "--group", "g"])
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    assert index(str(docs), "--profile", str(split)) == 0
    gr = GraphRoute(store=store)
    before = (gr.store.get_meta("g", FINGERPRINT_META), gr.store.get_meta("g", INDEX_PROFILE_META), gr.store.counts("g"))
    gr.close()
    shutil.copy(SAMPLE / "invoice_hv_2024_017.html", docs / "invoice_hv_2024_017.html")
    capsys.readouterr()

    assert index(str(docs / "invoice_hv_2024_017.html"), "--profile", str(pack)) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "the profile's parse differs from the group's" in said, said
    assert "reads 0 of its 2 documents" in said and "nothing was written" in said, said
    gr = GraphRoute(store=store)
    assert (gr.store.get_meta("g", FINGERPRINT_META), gr.store.get_meta("g", INDEX_PROFILE_META), gr.store.counts("g")) == before
    gr.close()

    # the group's own profile may add a document; the new one over every document may too
    assert index(str(docs / "invoice_hv_2024_017.html"), "--profile", str(split)) == 0
    assert index(str(docs), "--profile", str(pack), "--json") == 0
    gr = GraphRoute(store=store)
    assert len(gr.documents("g")) == 3
    stored = gr.store.get_meta("g", INDEX_PROFILE_META)
    assert isinstance(stored, dict) and stored["parse"]["chunk_sections"] == "pack"
    gr.close()
