"""GraphRoute.groups(), .documents() and .delete() on the embedded store, and a deleted
document's traces in the derived layers (kNN edges, entity graph, communities)."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphroute.core.api.models import EdgeType, Label
from graphroute.core.engine import GraphRoute
from graphroute.core.errors import NotFoundError, UserError

from tests.manage.conftest import write_corpus


def entity_names(gr: GraphRoute, group: str) -> set[str]:
    return {str(n.props.get("name")) for n in gr.store.iter_nodes(group, Label.ENTITY.value)}


def test_groups_and_documents_list_what_is_indexed(indexed: GraphRoute, tmp_path: Path) -> None:
    groups = {r["group"]: r for r in indexed.groups()}
    assert set(groups) == {"g", "h"}
    assert groups["g"]["documents"] == 3 and groups["h"]["documents"] == 1
    docs = indexed.documents("g")
    assert [d["title"] for d in docs] == ["Harbour", "Lighthouse", "Orchard"]
    for d in docs:
        own = [n for n in indexed.store.iter_nodes("g", Label.SENTENCE.value, doc_id=d["id"])]
        assert d["sentences"] == len(own) > 0
        assert d["path"].startswith(str((tmp_path / "corpus").resolve()))
        assert d["content_hash"] and d["indexed_at"] and d["indexed_at"].endswith("+00:00")
    with pytest.raises(NotFoundError, match="group 'nope' not found"):
        indexed.documents("nope")
    # a query in a group the store lacks is an error, not an empty answer
    with pytest.raises(NotFoundError, match=r"group 'nope' not found .*\(groups: g, h\)"):
        indexed.query("Who keeps the lighthouse?", group="nope")


def test_deleting_a_document_updates_the_derived_layers(indexed: GraphRoute, tmp_path: Path) -> None:
    before = indexed.query("Who built the Kestrel Point lighthouse?", group="g")
    assert before.citations and before.citations[0].document == "Lighthouse"
    assert "Ada Marlow" in entity_names(indexed, "g")
    lighthouse = next(d["id"] for d in indexed.documents("g") if d["title"] == "Lighthouse")
    owned = {n.id for n in indexed.store.iter_nodes("g", doc_id=lighthouse)}

    result = indexed.delete("g", "Lighthouse")
    assert result["deleted"] == [lighthouse] and result["documents"] == 2
    assert "entity_graph" in result["steps"] and "communities" in result["steps"]
    assert [d["title"] for d in indexed.documents("g")] == ["Harbour", "Orchard"]
    assert list(indexed.store.iter_nodes("g", doc_id=lighthouse)) == []
    assert all(e.src not in owned and e.dst not in owned for e in indexed.store.iter_edges("g"))
    # the entity layer is what indexing the two remaining documents alone gives
    fresh = GraphRoute(settings=indexed.settings, group="fresh")
    fresh.index([write_corpus(tmp_path / "rest", ["orchard.md", "harbour.md"])])
    assert entity_names(indexed, "g") == entity_names(fresh, "fresh")
    assert "Ada Marlow" not in entity_names(indexed, "g")
    entities = {n.id for n in indexed.store.iter_nodes("g", Label.ENTITY.value)}
    assert all(e.src in entities for e in indexed.store.iter_edges("g", [EdgeType.BELONGS_TO.value]))
    # a query never cites the deleted document, however it is asked
    for route in ("route1s_sentence", "route2_local", "route5_unified"):
        after = indexed.query("Who built the Kestrel Point lighthouse?", route=route, group="g")
        assert all(c.document != "Lighthouse" for c in after.citations)
        assert all(ev.document != "Lighthouse" for ev in after.evidence)
    # other groups are untouched
    assert [d["title"] for d in indexed.documents("h")] == ["Orchard"]


def test_delete_by_id_and_by_path_and_the_errors(indexed: GraphRoute, tmp_path: Path) -> None:
    harbour = tmp_path / "corpus" / "harbour.md"
    assert indexed.delete("g", str(harbour))["documents"] == 2
    orchard = next(d["id"] for d in indexed.documents("g") if d["title"] == "Orchard")
    assert indexed.delete("g", orchard)["deleted"] == [orchard]
    with pytest.raises(NotFoundError, match="no document 'Harbour' in group 'g'"):
        indexed.delete("g", "Harbour")
    with pytest.raises(NotFoundError):
        indexed.delete("missing", "x")


def test_a_title_two_documents_share_is_refused(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gr = GraphRoute(settings=settings, group="twins")
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "notes.md").write_text(f"# Notes\n\nFolder {sub} keeps the weekly notes of the team.\n")
    gr.index([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(UserError, match="2 documents in group 'twins' are titled 'Notes'"):
        gr.delete("twins", "Notes")
    gr.close()


def test_a_confirmed_delete_removes_the_documents_confirmed(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The CLI asks before it deletes and then deletes the documents it asked about (``ids``):
    a document indexed under the same title while the question waited is kept."""
    from graphroute.core.index.manage import documents_to_delete

    gr = GraphRoute(settings=settings, group="twins")
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "notes.md").write_text(f"# Notes\n\nFolder {sub} keeps the weekly notes of the team.\n")
    gr.index([tmp_path / "a"])
    confirmed = [d["id"] for d in documents_to_delete(gr.store, "twins", "Notes")]
    gr.index([tmp_path / "b"])  # a second "Notes" arrives before the delete runs
    assert gr.delete("twins", "Notes", ids=confirmed)["deleted"] == confirmed
    left = gr.documents("twins")
    assert len(left) == 1 and left[0]["id"] not in confirmed and left[0]["title"] == "Notes"
    gr.close()


def test_a_document_named_by_id_is_found_without_listing_the_group(indexed: GraphRoute, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphroute.core.index.manage import resolve_documents

    orchard = next(d for d in indexed.documents("g") if d["title"] == "Orchard")

    def listed(*_: object, **__: object) -> None:
        raise AssertionError("the group's documents were listed")

    monkeypatch.setattr(type(indexed.store), "document_page", listed)
    assert resolve_documents(indexed.store, "g", orchard["id"]) == [orchard]
    with pytest.raises(AssertionError, match="listed"):  # a title still reads the listing
        resolve_documents(indexed.store, "g", "Orchard")


def test_deleting_a_group(indexed: GraphRoute) -> None:
    assert indexed.delete("h") == {"group": "h", "deleted_group": True, "documents": 1}
    assert [r["group"] for r in indexed.groups()] == ["g"]
    assert len(indexed.documents("g")) == 3
    with pytest.raises(NotFoundError):
        indexed.delete("h")


def test_one_path_given_alone_is_one_path(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from .conftest import write_corpus

    folder = write_corpus(tmp_path / "alone")
    gr = GraphRoute(settings=settings, group="solo")
    report = gr.index(f"{folder}/")  # a string, not a list: not its characters (the last one "/")
    assert report.indexed == 3 and report.failed == []
    assert sorted(d["title"] for d in gr.documents("solo")) == ["Harbour", "Lighthouse", "Orchard"]
    assert gr.index(folder / "orchard.md", roots=folder).unchanged == 1  # a Path, and one root, alike
    gr.close()


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_a_timeout_must_be_positive(indexed: GraphRoute, timeout: float) -> None:
    with pytest.raises(UserError, match="timeout_s must be a positive number"):
        indexed.query("Who keeps the lighthouse?", group="g", timeout_s=timeout)
