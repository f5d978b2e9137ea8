"""The Indexer against the real embedded store, spaCy and MiniLM: skeleton invariants,
incremental re-indexing, bad files, the embedding cache, kNN steps and the sweep."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from graphroute.core.api.constants import INDEX_PROFILE_META, INDEX_REPORT_META
from graphroute.core.api.models import Edge, Node
from graphroute.core.api.store import GraphStore
from graphroute.core.apps.bench.sweep import THRESHOLDS, threshold_sweep
from graphroute.core.config.index_profile import ComponentSpec, IndexProfile
from graphroute.core.errors import IndexProfileError
from graphroute.core.index.pipeline import Indexer
from graphroute.core.index.stats import group_stats

from .conftest import SAMPLE_CORPUS, skeleton_profile
from .invariants import check_skeleton


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    dst = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, dst)
    return dst


def sentences_of(store: GraphStore, group: str, doc_id: str | None = None) -> list[str]:
    return sorted(n.props["text"] for n in store.iter_nodes(group, "Sentence", doc_id=doc_id))


def doc_ids(store: GraphStore, group: str) -> dict[str, str]:
    """title -> doc id"""
    return {n.props["title"]: n.id for n in store.iter_nodes(group, "Document")}


def test_sample_corpus_index_report_meta_and_invariants(make_indexer, store: GraphStore, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    profile = skeleton_profile()
    profile.steps.append(ComponentSpec(use="not_a_registered_step", enabled=False))
    report = make_indexer(profile=profile).index_paths([corpus])
    data = report.to_json()
    assert {"indexed", "unchanged", "removed", "failed", "seconds", "documents", "sentences", "steps"} <= set(data)
    assert data["indexed"] == 3 and data["failed"] == [] and data["documents"] == 3  # questions.txt ignored
    assert data["sentences"] == report.sentences_written > 20
    assert data["steps"]["not_a_registered_step"] == {"skipped": "disabled in the profile"}
    assert data["warnings"] == []
    knn = data["steps"]["sentence_knn"]
    assert knn["within_budget"] and knn["budget"] == 2 * data["sentences"]
    figures = check_skeleton(store, "g")
    assert figures["sentences"] == data["sentences"] and figures["next"] > 0
    counts = store.counts("g")
    assert counts["vectors"]["sentence"] == data["sentences"]
    assert counts["vectors"]["chunk"] == counts["nodes"]["TextChunk"]
    assert 0 < counts["vectors"]["section"] <= counts["nodes"]["Section"]
    assert store.get_meta("g", INDEX_PROFILE_META)["embedder"]["use"] == "local"
    assert store.get_meta("g", INDEX_REPORT_META)["indexed"] == 3
    assert group_stats(store, "g")["invariants"]["related_to_budget"]["ok"]
    # json-serialisable as the CLI prints it
    json.dumps(data)


def test_incremental_skip_replace_remove(make_indexer, store: GraphStore, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    make_indexer().index_paths([corpus])
    ids = doc_ids(store, "g")
    warranty = ids["Harborview Home Appliance Warranty"]
    invoice = ids["Invoice HV-2024-017"]
    invoice_sentences = sentences_of(store, "g", invoice)
    v0 = store.version("g")

    again = make_indexer().index_paths([corpus])
    assert (again.indexed, again.unchanged, again.removed) == (0, 3, 0)
    assert again.steps == {} and store.version("g") == v0  # nothing written at all

    path = corpus / "appliance_warranty.txt"
    path.write_text(path.read_text(encoding="utf-8").replace("two years", "five years"), encoding="utf-8")
    changed = make_indexer().index_paths([corpus])
    assert (changed.indexed, changed.unchanged) == (1, 2)
    warranty_text = " ".join(sentences_of(store, "g", warranty))
    assert "five years" in warranty_text and "two years" not in warranty_text
    assert sentences_of(store, "g", invoice) == invoice_sentences
    assert "sentence_knn" in changed.steps
    check_skeleton(store, "g")

    (corpus / "invoice_hv_2024_017.html").unlink()
    kept = make_indexer().index_paths([corpus])  # without remove_missing nothing is deleted
    assert kept.removed == 0 and invoice in doc_ids(store, "g").values()
    removed = make_indexer().index_paths([corpus], remove_missing=True)
    assert removed.removed == 1 and removed.documents == 2
    assert list(store.iter_nodes("g", doc_id=invoice)) == []
    assert invoice not in store.get_meta("g", "documents")
    assert all(invoice not in e.src and invoice not in e.dst for e in store.iter_edges("g"))
    check_skeleton(store, "g")


def test_bad_files_are_reported_and_nothing_indexed_is_lost(make_indexer, store: GraphStore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "mixed"
    folder.mkdir()
    good = folder / "good.md"
    good.write_text("# Good\n\nThe good document has a sentence about the harbour.\n", encoding="utf-8")
    keep = folder / "keep.txt"
    keep.write_text("This file is indexed first and later becomes unreadable.", encoding="utf-8")
    make_indexer().index_paths([folder])
    keep_id = doc_ids(store, "g")["keep"]
    before = sentences_of(store, "g", keep_id)
    assert before

    (folder / "empty.txt").write_bytes(b"")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "garbled.txt").write_bytes(bytes(range(128, 256)) * 16)  # text in no encoding
    keep.write_bytes(b"\x00\x01binary now")
    (folder / "new.md").write_text("A new document about the lighthouse keeper and his boat.", encoding="utf-8")
    report = make_indexer().index_paths([folder, tmp_path / "does-not-exist"], remove_missing=True)
    reasons = {Path(f["path"]).name: f["reason"] for f in report.failed}
    assert reasons["empty.txt"].startswith("empty file")
    assert "photo.png" not in reasons  # an unsupported type is skipped, not failed
    assert [Path(f["path"]).name for f in report.skipped] == ["photo.png"]
    assert "unsupported file type '.png'" in report.skipped[0]["reason"]
    assert "not text in any encoding" in reasons["garbled.txt"]
    assert "binary file" in reasons["keep.txt"]
    assert reasons["does-not-exist"] == "no such file or directory"
    assert report.indexed == 1 and report.unchanged == 1 and report.removed == 0
    assert sentences_of(store, "g", keep_id) == before  # the old version survives a bad update
    assert set(doc_ids(store, "g")) == {"Good", "keep", "new"}


def test_file_over_profile_max_mb_is_reported(make_indexer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    big = tmp_path / "big.txt"
    big.write_text("Many words in a big file. " * 60_000, encoding="utf-8")
    profile = skeleton_profile(max_file_mb=1)
    report = make_indexer(profile=profile).index_paths([big])
    assert report.indexed == 0 and "over the limit of 1 MB" in report.failed[0]["reason"]


def test_embedding_cache_makes_reembedding_unchanged_text_free(make_indexer, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    first = make_indexer("a")
    first.index_paths([corpus])
    inner = first.embedder().inner  # type: ignore[attr-defined]
    assert inner.calls > 0 and inner.texts_embedded > 0

    second = make_indexer("b")  # another group, same cache directory, fresh model counters
    report = second.index_paths([corpus])
    assert report.indexed == 3
    assert second.embedder().inner.calls == 0  # type: ignore[attr-defined]
    assert report.embedding_cache["misses"] == 0 and report.embedding_cache["hits"] > 0

    path = corpus / "appliance_warranty.txt"
    path.write_text(path.read_text(encoding="utf-8") + "\n\nThe warranty is transferable to a new owner.", encoding="utf-8")
    third = make_indexer("b")
    third.index_paths([corpus])
    # only the new sentence and the changed chunk reach the model
    assert third.embedder().inner.texts_embedded == 2  # type: ignore[attr-defined]


def test_sentence_knn_low_threshold_keeps_invariants_and_spares_entity_edges(make_indexer, store: GraphStore, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    make_indexer(profile=skeleton_profile(threshold=0.3, k=2)).index_paths([corpus])
    figures = check_skeleton(store, "g")
    assert figures["related_to"] > 0
    rel = list(store.iter_edges("g", ["RELATED_TO"]))
    assert all(e.props["similarity"] >= 0.3 and e.props["source"] == "knn_sentence" for e in rel)
    pairs = [frozenset((e.src, e.dst)) for e in rel]
    assert len(pairs) == len(set(pairs))  # stored once per pair
    # another engineer's entity RELATED_TO edge survives a rebuild of the sentence layer
    store.write("g", [Node(id="e1", label="Entity", group="g", props={"name": "A"}),
                      Node(id="e2", label="Entity", group="g", props={"name": "B"})],
                [Edge(src="e1", dst="e2", type="RELATED_TO", group="g")])
    ctx_indexer = make_indexer(profile=skeleton_profile(threshold=0.95, k=1))
    stats = ctx_indexer._run_steps(set(), set(), ctx_indexer_report())  # type: ignore[attr-defined]
    assert stats["sentence_knn"]["edges"] < figures["related_to"]
    left = list(store.iter_edges("g", ["RELATED_TO"]))
    assert any(e.src == "e1" for e in left)
    assert all(e.props.get("similarity", 1.0) >= 0.95 for e in left if e.src != "e1")


def ctx_indexer_report():  # type: ignore[no-untyped-def]
    from graphroute.core.index.pipeline import IndexReport

    return IndexReport()


def test_sweep_matches_the_step_and_is_monotone(make_indexer, store: GraphStore, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    make_indexer(profile=skeleton_profile(threshold=0.80, k=2)).index_paths([corpus])
    rows = threshold_sweep(store, "g")
    assert [r["threshold"] for r in rows] == list(THRESHOLDS)
    edges = [r["edges"] for r in rows]
    assert edges == sorted(edges, reverse=True)
    assert all(r["within_budget"] for r in rows)
    step_edges = sum(1 for e in store.iter_edges("g", ["RELATED_TO"]))
    assert rows[0]["edges"] == step_edges  # same rule as sentence_knn at 0.80
    n = store.counts("g")["nodes"]["Sentence"]
    assert rows[0]["density"] == round(step_edges / n, 4)


def test_cli_index_with_sweep(tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphroute.core.apps.cli.main import cli_app
    from typer.testing import CliRunner

    profile = tmp_path / "p.yaml"
    profile.write_text("name: p\nsteps:\n  - use: sentence_knn\n", encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(cli_app(), ["index", str(corpus), "--store", str(tmp_path / "s"), "--group", "c",
                                   "--profile", str(profile), "--sweep-thresholds", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout[res.stdout.index("{"):])
    assert data["indexed"] == 3 and len(data["sweep"]) == 5


def test_profile_change_reparses_everything(make_indexer, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    make_indexer().index_paths([corpus])
    report = make_indexer(profile=skeleton_profile(chunk_max_tokens=32)).index_paths([corpus])
    assert report.indexed == 3 and report.unchanged == 0


def test_a_new_loader_version_reparses_only_what_it_read(make_indexer, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Documents read by an older version of a loader are parsed again although their files
    did not change; the other loaders' documents stay as they are."""
    from graphroute.plugins.loaders.files import TextLoader

    make_indexer().index_paths([corpus])
    assert make_indexer().index_paths([corpus]).unchanged == 3
    monkeypatch.setattr(TextLoader, "version", TextLoader.version + 1)
    bumped = make_indexer().index_paths([corpus])
    assert (bumped.indexed, bumped.unchanged) == (1, 2)  # the one .txt file of the three
    assert make_indexer().index_paths([corpus]).unchanged == 3


def test_indexer_accepts_profile_names(store: GraphStore, registry, settings) -> None:  # type: ignore[no-untyped-def]
    ix = Indexer(store, "g", registry=registry, settings=settings, profile="default")
    assert isinstance(ix.profile, IndexProfile) and ix.profile.name == "default"


def test_each_run_first_brings_the_group_up_to_date(make_indexer, store: GraphStore, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """GraphStore.upgrade_group runs before the documents (Neo4j indexes the sentences of a
    group written before its sentence index there, tests/conformance/test_text_search.py);
    the report says what it did."""
    calls: list[str] = []

    def upgrade(group: str) -> list[str]:
        calls.append(group)
        return ["indexed the text of 3 sentences"] if len(calls) == 1 else []

    monkeypatch.setattr(store, "upgrade_group", upgrade)
    assert make_indexer().index_paths([corpus]).to_json()["upgrades"] == ["indexed the text of 3 sentences"]
    assert make_indexer().index_paths([corpus]).to_json()["upgrades"] == [] and calls == ["g", "g"]


@pytest.mark.parametrize("entry, message", [
    (ComponentSpec(use="sentence_kmn"), "unknown index step 'sentence_kmn'"),
    (ComponentSpec(use="sentence_knn", with_={"threshhold": 0.9}), "unknown parameter `threshhold`"),
    (ComponentSpec(use="sentence_knn", with_={"k": -1}), "bad value for `k`"),
])
def test_a_bad_index_step_is_refused_before_anything_is_written(  # type: ignore[no-untyped-def]
    make_indexer, store: GraphStore, corpus: Path, entry: ComponentSpec, message: str
) -> None:
    make_indexer().index_paths([corpus])
    before = store.counts("g")
    profile = skeleton_profile()
    profile.steps.append(entry)
    (corpus / "extra.md").write_text("# Extra\n\nA new page about parking permits.\n", encoding="utf-8")
    with pytest.raises(IndexProfileError, match=re.escape(message)) as info:
        make_indexer(profile=profile).index_paths([corpus])
    assert "sentence_knn" in str(info.value)  # the fix names what is registered or accepted
    assert store.counts("g") == before  # the new file was not read, nothing indexed was touched


def test_a_step_that_fails_is_reported_and_fails_the_run(tmp_path: Path, store: GraphStore, settings, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    from graphroute.core.api.components import IndexStep
    from graphroute.core.hookspecs import hookimpl
    from graphroute.core.index.pipeline import failed_steps, index_exit_code
    from graphroute.core.registry import build_registry

    class Broken(IndexStep):
        name = "broken_step"

        def run(self, ctx):  # type: ignore[no-untyped-def]
            raise RuntimeError("the layer could not be built")

    class Plugin:
        @hookimpl
        def register_index_steps(self) -> list[type[IndexStep]]:
            return [Broken]

    registry = build_registry(extra_plugins=[Plugin()])
    profile = skeleton_profile()
    profile.steps.append(ComponentSpec(use="broken_step"))
    data = Indexer(store, "g", registry=registry, settings=settings, profile=profile).index_paths([corpus]).to_json()
    assert data["indexed"] == 3 and data["failed"] == []  # the documents are written
    assert data["steps"]["broken_step"] == {"error": "RuntimeError: the layer could not be built"}
    assert data["warnings"] == ["index step 'broken_step' failed: RuntimeError: the layer could not be built; the next index run of the group runs it again"]
    assert index_exit_code(data) == 1 and failed_steps(data) == ["broken_step"]  # an HTTP job fails too
    assert index_exit_code({**data, "steps": {"sentence_knn": {}}}) == 0


def test_a_new_way_of_reading_documents_re_embeds_the_group_and_keeps_it_queryable(make_indexer, store: GraphStore, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """An embedder whose document vectors change without its query space moving (its
    document_id, not its model_id: a new `long_texts` default, say) re-embeds the group at
    the next run, and the group's recorded model, which queries must match, stays."""
    from graphroute.core.api.constants import EMBEDDER_MODEL_META
    from graphroute.plugins.embedders.local import LocalEmbedder

    make_indexer().index_paths([corpus])
    recorded = store.get_meta("g", EMBEDDER_MODEL_META)
    assert make_indexer().index_paths([corpus]).unchanged == 3
    monkeypatch.setattr(LocalEmbedder, "document_id", property(lambda self: f"{self.model_id}:read-otherwise"))
    report = make_indexer().index_paths([corpus])
    assert report.indexed == 3 and report.unchanged == 0
    assert store.get_meta("g", EMBEDDER_MODEL_META) == recorded


def test_a_step_that_failed_runs_again_in_the_next_run(tmp_path: Path, store: GraphStore, settings, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    """A step that failed (a full disk, a service down) left its layer unbuilt: the next run
    of the same, unchanged input runs it again instead of finding nothing to do."""
    from graphroute.core.api.components import IndexStep
    from graphroute.core.hookspecs import hookimpl
    from graphroute.core.registry import build_registry

    broken = tmp_path / "broken"
    broken.write_text("the step fails while this file exists", encoding="utf-8")

    class Flaky(IndexStep):
        name = "flaky_step"

        def run(self, ctx):  # type: ignore[no-untyped-def]
            if broken.exists():
                raise OSError("No space left on device")
            ctx.store.set_meta(ctx.group, "flaky_layer", sorted(ctx.changed_docs))
            return {"documents": len(ctx.changed_docs)}

    class Plugin:
        @hookimpl
        def register_index_steps(self) -> list[type[IndexStep]]:
            return [Flaky]

    registry = build_registry(extra_plugins=[Plugin()])
    profile = skeleton_profile()
    profile.steps.append(ComponentSpec(use="flaky_step"))

    def run() -> dict[str, object]:
        return Indexer(store, "g", registry=registry, settings=settings, profile=profile).index_paths([corpus]).to_json()

    first = run()
    assert first["indexed"] == 3 and "error" in first["steps"]["flaky_step"]  # type: ignore[index, operator]
    assert "the next index run of the group runs it again" in first["warnings"][0]  # type: ignore[index]
    assert store.get_meta("g", "flaky_layer") is None
    assert group_stats(store, "g")["unfinished_run"] is True  # `stats` and `query` say so

    broken.unlink()  # the disk has room again
    second = run()
    assert second["indexed"] == 0 and second["unchanged"] == 3
    assert second["steps"]["flaky_step"] == {"documents": 3, "seconds": second["steps"]["flaky_step"]["seconds"]}  # type: ignore[index]
    assert second["warnings"] == []
    assert len(store.get_meta("g", "flaky_layer")) == 3  # built over every document
    assert group_stats(store, "g")["unfinished_run"] is False

    assert run()["steps"] == {}  # and then the group is complete: nothing left to do
