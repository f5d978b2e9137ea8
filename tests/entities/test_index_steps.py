"""The entity steps run by the real Indexer with the real spaCy model and the packaged
embedding model, on both stores (the Neo4j cases are skipped when no server is reachable,
like the conformance suite): group isolation, document removal, replay, LLM summaries."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.api.components import IndexContext
from graphroute.core.api.constants import FINGERPRINT_META
from graphroute.core.api.models import EdgeType, Label
from graphroute.core.api.store import GraphStore
from graphroute.core.config.index_profile import IndexProfile
from graphroute.core.config.settings import Settings
from graphroute.core.index.files import fingerprint
from graphroute.core.index.pipeline import Indexer
from graphroute.core.lib.entities import OWN_PAGES_META
from graphroute.core.registry import get_registry
from graphroute.plugins.graph_builders.entity_graph import EntityKnnStep
from graphroute.plugins.stores.embedded import EmbeddedStore

from tests.conformance.conftest import open_backend

OPENIE = Path("/work/shared/datasets/musique/openie_gpt-3.5-turbo.json")

ENTITY_STEPS: list[dict[str, Any]] = [
    {"use": "entity_knn", "with": {"threshold": 0.6, "k": 5}},
    {"use": "hub_entities"},
    {"use": "communities"},
]


def profile(extractor: str, **extractor_params: Any) -> IndexProfile:
    steps = [
        {
            "use": "entity_graph",
            "with": {"extractor": extractor, "extractor_params": extractor_params},
        }
    ]
    return IndexProfile.model_validate({"name": f"test_{extractor}", "steps": steps + ENTITY_STEPS})


def write_docs(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def index(
    store: GraphStore, group: str, folder: Path, prof: IndexProfile, cache: Path, **kw: Any
) -> dict[str, Any]:
    ix = Indexer(
        store, group, registry=get_registry(), settings=Settings(cache_dir=cache), profile=prof
    )
    report = ix.index_paths([folder], **kw).to_json()
    assert not report["warnings"], report["warnings"]
    return report


GROUP_A = {
    "curie": "Marie Curie was born in Warsaw in 1867. Marie Curie moved to Paris to study physics. "
    "She won the Nobel Prize in Physics with Pierre Curie.",
    "paris": "Paris is the capital of France. The Sorbonne is a university in Paris. Pierre Curie taught at the Sorbonne.",
}
GROUP_B = {
    "seine": "The Seine flows through Paris before it reaches the English Channel. Paris has many bridges over the Seine.",
    "eiffel": "Gustave Eiffel built the Eiffel Tower in Paris for the 1889 World's Fair.",
    "zanzibar": "Zanzibar is an archipelago off the coast of Tanzania. Stone Town is the old city of Zanzibar.",
}


@pytest.fixture(scope="module", params=["embedded", "neo4j"])
def two_groups(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GraphStore, dict[str, dict], dict[str, str]]]:
    """Groups a and b (unique names, the Neo4j server is shared) indexed with spaCy."""
    root = tmp_path_factory.mktemp("ent_groups")
    store = open_backend(request.param, tmp_path_factory)
    names = {k: f"ent-{k}-{uuid.uuid4().hex[:8]}" for k in ("a", "b")}
    reports = {
        "a": index(
            store,
            names["a"],
            write_docs(root / "docs_a", GROUP_A),
            profile("spacy"),
            root / "cache",
        ),
        "b": index(
            store,
            names["b"],
            write_docs(root / "docs_b", GROUP_B),
            profile("spacy"),
            root / "cache",
        ),
    }
    yield store, reports, names
    for g in names.values():
        store.delete_group(g)
    store.close()


def test_entity_layer_is_built_and_reported(
    two_groups: tuple[GraphStore, dict[str, dict], dict[str, str]],
) -> None:
    store, reports, names = two_groups
    a = names["a"]
    steps = reports["a"]["steps"]
    counts = store.counts(a)
    eg = steps["entity_graph"]
    assert eg["entities"] == counts["nodes"]["Entity"] > 0
    # nothing the builder produced was dropped by the store (no dangling endpoints)
    assert counts["edges"]["MENTIONS"] == eg["chunk_mentions"] + eg["sentence_mentions"]
    assert counts["edges"].get("CO_OCCURS", 0) == eg["co_occurs_edges"] > 0  # spaCy: no triples
    assert counts["vectors"]["entity"] == eg["entities"]
    assert counts["edges"].get("SEMANTICALLY_SIMILAR", 0) >= steps["entity_knn"]["knn_edges"]
    assert counts["edges"]["HAS_HUB_ENTITY"] == steps["hub_entities"]["hub_edges"] > 0
    com = steps["communities"]
    assert counts["nodes"].get("Community", 0) == com["communities"] > 0
    assert counts["vectors"]["community"] == com["communities"]
    assert set(com["size_distribution"]) == {"min", "median", "max", "histogram"}
    ents = {n.id: n for n in store.iter_nodes(a, Label.ENTITY)}
    curie = ents["ent:marie curie"].props
    assert (
        curie["name"] == "Marie Curie" and curie["doc_count"] == 1 and curie["mention_count"] >= 2
    )
    assert all(isinstance(n.props.get("community"), int) for n in ents.values())
    for c in store.iter_nodes(a, Label.COMMUNITY):
        assert c.props["summary"] and c.props["title"] and c.props["size"] >= 2
    # the sentence-level mentions point at sentences that really contain the name
    sent_edges = [
        e
        for e in store.edges_of(a, ["ent:marie curie"], [EdgeType.MENTIONS], "in")
        if e.props["level"] == "sentence"
    ]
    assert len(sent_edges) == 2
    for s in store.get_nodes(a, [e.src for e in sent_edges]):
        assert s.label == Label.SENTENCE and "marie curie" in s.props["text"].lower()
    # graphroute stats shows what the steps reported
    from graphroute.core.index.stats import group_stats

    assert (
        group_stats(store, a)["index"]["steps"]["communities"]["communities"] == com["communities"]
    )


def test_community_nodes_list_what_the_query_stages_read(
    two_groups: tuple[GraphStore, dict[str, dict], dict[str, str]],
) -> None:
    """Each Community node lists its members by distinct neighbours and by mentions, and the
    documents they span, as a scan of the whole group defines them (community_peers and
    thematic_seeds read these instead of the group); the client detected them."""
    store, reports, names = two_groups
    a = names["a"]
    assert reports["a"]["steps"]["communities"]["detected_by"] == "client"
    ents = {n.id: n for n in store.iter_nodes(a, Label.ENTITY)}
    linked: dict[str, set[str]] = {e: set() for e in ents}
    for e in store.iter_edges(a, [EdgeType.RELATION, EdgeType.CO_OCCURS, EdgeType.SEMANTICALLY_SIMILAR]):
        if e.src in ents and e.dst in ents and e.src != e.dst:
            linked[e.src].add(e.dst)
            linked[e.dst].add(e.src)
    assert all(n.props["links"] == len(linked[e]) for e, n in ents.items())
    docs: dict[str, set[str]] = {e: set() for e in ents}
    chunks = {n.id: n.doc_id for n in store.iter_nodes(a, Label.CHUNK)}
    for e in store.iter_edges(a, [EdgeType.MENTIONS]):
        if e.src in chunks and e.dst in docs:
            docs[e.dst].add(str(chunks[e.src]))
    for c in store.iter_nodes(a, Label.COMMUNITY):
        members = sorted(e.src for e in store.edges_of(a, [c.id], [EdgeType.BELONGS_TO], "in"))
        assert c.props["peer_ids"] == sorted(members, key=lambda e: (-len(linked[e]), e))[:64]
        mentions = {e: ents[e].props["mention_count"] for e in members}
        assert c.props["mentioned_ids"] == sorted(members, key=lambda e: (-mentions[e], e))[:64]
        assert c.props["documents"] == len(set().union(*(docs[e] for e in members)))


def test_no_edge_crosses_groups(
    two_groups: tuple[GraphStore, dict[str, dict], dict[str, str]],
) -> None:
    store, _, names = two_groups
    a, b = names["a"], names["b"]
    ids = {g: {n.id for n in store.iter_nodes(names[g])} for g in ("a", "b")}
    assert "ent:paris" in ids["a"] and "ent:paris" in ids["b"]  # same name, two groups
    for g in ("a", "b"):
        n_edges = 0
        for e in store.iter_edges(names[g]):
            n_edges += 1
            assert e.group == names[g]
            assert e.src in ids[g] and e.dst in ids[g], (g, e)
        assert n_edges > 0
        for e in store.iter_edges(
            names[g], [EdgeType.MENTIONS, EdgeType.CO_OCCURS, EdgeType.BELONGS_TO]
        ):
            assert e.src in ids[g] and e.dst in ids[g]
    # entity statistics count only the group's own documents
    pa = store.get_nodes(a, ["ent:paris"])[0].props
    pb = store.get_nodes(b, ["ent:paris"])[0].props
    assert pa["doc_count"] == 2 and pb["doc_count"] == 2
    assert "ent:zanzibar" not in ids["a"] and "ent:marie curie" not in ids["b"]
    # vectors of one group's entity space are only its own entities
    vec_ids, _ = store.all_vectors(a, "entity")
    assert set(vec_ids) <= ids["a"]


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_document_removal_removes_its_mentions_and_orphaned_entities(
    backend: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    store = open_backend(backend, tmp_path_factory)
    g = f"ent-rm-{uuid.uuid4().hex[:8]}"
    folder = write_docs(tmp_path / "docs", GROUP_B)
    cache = tmp_path / "cache"
    first = index(store, g, folder, profile("spacy"), cache)
    assert first["steps"]["entity_graph"]["extraction"]["extracted_chunks"] == 3
    before = {n.id: n for n in store.iter_nodes(g, Label.ENTITY)}
    assert {"ent:zanzibar", "ent:stone town", "ent:paris"} <= set(before)
    doc = next(
        d
        for d in store.iter_nodes(g, Label.DOCUMENT)
        if d.props["title"].lower().startswith("zanzibar")
    )
    doc_sentences = {n.id for n in store.iter_nodes(g, doc_id=doc.id)}

    (folder / "zanzibar.txt").unlink()
    second = index(store, g, folder, profile("spacy"), cache, remove_missing=True)
    assert second["removed"] == 1
    after = {n.id: n for n in store.iter_nodes(g, Label.ENTITY)}
    assert (
        "ent:zanzibar" not in after
        and "ent:stone town" not in after
        and "ent:tanzania" not in after
    )
    assert "ent:paris" in after and "ent:seine" in after
    assert not [e for e in store.iter_edges(g, [EdgeType.MENTIONS]) if e.src in doc_sentences]
    assert not [e for e in store.iter_edges(g) if e.doc_id == doc.id]
    # members of the removed document's communities are gone from every Community node
    for c in store.iter_nodes(g, Label.COMMUNITY):
        assert not {"ent:zanzibar", "ent:stone town"} & set(c.props["top_entity_ids"])
    # the rebuild re-used the cached extractions of the unchanged documents
    ex = second["steps"]["entity_graph"]["extraction"]
    assert ex["cached_chunks"] == 2 and ex["extracted_chunks"] == 0
    store.delete_group(g)
    store.close()


def test_steps_skip_work_when_nothing_changed(
    two_groups: tuple[GraphStore, dict[str, dict], dict[str, str]], tmp_path: Path
) -> None:
    store, reports, names = two_groups
    a = names["a"]
    ix = Indexer(
        store,
        a,
        registry=get_registry(),
        settings=Settings(cache_dir=tmp_path),
        profile=profile("spacy"),
    )
    ctx = IndexContext(
        store=store,
        group=a,
        registry=get_registry(),
        embedder=ix.embedder(),
        profile=ix.profile,
        settings=ix.settings,
    )
    version = store.version(a)
    out = EntityKnnStep(EntityKnnStep.Params(threshold=0.6, k=5)).run(ctx)
    assert (
        out["rebuilt"] is False
        and out["knn_edges"] == reports["a"]["steps"]["entity_knn"]["knn_edges"]
    )
    assert store.version(a) == version
    # a changed parameter is a rebuild even with no document change
    out = EntityKnnStep(EntityKnnStep.Params(threshold=0.99, k=1)).run(ctx)
    assert (
        out["rebuilt"] is True
        and out["knn_edges"] <= reports["a"]["steps"]["entity_knn"]["knn_edges"]
    )


def test_own_pages_are_written_and_a_layer_built_without_them_is_rebuilt(
    two_groups: tuple[GraphStore, dict[str, dict], dict[str, str]], tmp_path: Path
) -> None:
    """The document titled 'paris' is the entity Paris's own page: its chunks get OWN_PAGE
    edges to it (no other document's title names an entity of the group). A group whose
    entity layer was built before those edges existed (steps fingerprinted without the
    step's layer version, no edges, no marker) gets them from its next index run, though no
    document changed."""
    store = two_groups[0]
    group = f"ent-own-{uuid.uuid4().hex[:8]}"
    folder = write_docs(tmp_path / "docs", GROUP_A)
    try:
        first = index(store, group, folder, profile("spacy"), tmp_path / "cache")
        docs = {n.id: n.props.get("title") for n in store.iter_nodes(group, Label.DOCUMENT)}
        pages = sorted((e.src, e.dst) for e in store.iter_edges(group, [EdgeType.OWN_PAGE]))
        paris = sorted(n.id for n in store.iter_nodes(group, Label.CHUNK) if docs.get(n.doc_id or "") == "paris")
        assert paris and pages == [(c, "ent:paris") for c in paris]
        assert first["steps"]["entity_graph"]["own_page_edges"] == len(pages)
        assert store.get_meta(group, OWN_PAGES_META) == {"edges": len(pages)}
        # the group as an older graphroute left it
        store.delete_derived(group, edge_types=[EdgeType.OWN_PAGE])
        store.set_meta(group, OWN_PAGES_META, None)
        prof = profile("spacy").model_dump(by_alias=True, mode="json")["steps"]
        store.set_meta(group, FINGERPRINT_META, {**store.get_meta(group, FINGERPRINT_META), "steps": fingerprint(prof)})
        again = index(store, group, folder, profile("spacy"), tmp_path / "cache")
        assert again["indexed"] == 0 and again["steps"]["entity_graph"]["rebuilt"] is True
        assert sorted((e.src, e.dst) for e in store.iter_edges(group, [EdgeType.OWN_PAGE])) == pages
        assert store.get_meta(group, OWN_PAGES_META) == {"edges": len(pages)}
        assert index(store, group, folder, profile("spacy"), tmp_path / "cache")["steps"] == {}  # nothing left to do
    finally:
        store.delete_group(group)


@pytest.mark.skipif(not OPENIE.is_file(), reason="musique dataset not present")
def test_replay_extractor_through_the_indexer(tmp_path: Path) -> None:
    recorded = json.loads(OPENIE.read_text(encoding="utf-8"))["docs"][:4]
    corpus = tmp_path / "corpus" / "musique_slice.json"
    corpus.parent.mkdir()
    corpus.write_text(
        json.dumps([{"title": d["title"], "text": d["text"]} for d in recorded]), encoding="utf-8"
    )
    store = EmbeddedStore(str(tmp_path / "store"))
    report = index(
        store, "m", corpus.parent, profile("replay", path=str(OPENIE)), tmp_path / "cache"
    )
    eg = report["steps"]["entity_graph"]
    assert eg["extraction"]["replay_hits"] == 4 and eg["extraction"].get("replay_misses", 0) == 0
    from graphroute.core.lib.entities import entity_id

    ids = {n.id for n in store.iter_nodes("m", Label.ENTITY)}
    for d in recorded:
        assert {entity_id(e) for e in d["extracted_entities"]} <= ids
    rel = {(e.src, e.dst): e.props for e in store.iter_edges("m", [EdgeType.RELATION])}
    s, r, o = recorded[0]["extracted_triples"][0]
    assert rel[(entity_id(s), entity_id(o))]["relation"] == r
    assert eg["triples"] == sum(
        1
        for d in recorded
        for t in d["extracted_triples"]
        if len(t) == 3 and entity_id(t[0]) != entity_id(t[2])
    )
    store.close()


def test_community_summaries_use_the_llm_when_configured(
    two_groups: tuple[GraphStore, dict[str, dict], dict[str, str]],
    tmp_path: Path,
    fake_openai: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graphroute.plugins.graph_builders.entity_graph import CommunitiesStep

    from tests.servers.fake_apis import Reply

    store, _, names = two_groups
    b = names["b"]
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    cls = get_registry().llm_clients.get("openai")
    llm = cls(
        cls.Params(
            model="fake-summary",
            base_url=fake_openai.url + "/v1",
            cache_dir=str(tmp_path / "llm"),
            max_retries=0,
        )
    )
    fake_openai.responder = lambda body: json.dumps(
        {"title": "Curie family", "summary": "Physicists in Paris."}
    )
    ix = Indexer(
        store,
        b,
        registry=get_registry(),
        settings=Settings(cache_dir=tmp_path),
        profile=profile("spacy"),
    )
    ctx = IndexContext(
        store=store,
        group=b,
        registry=get_registry(),
        embedder=ix.embedder(),
        profile=ix.profile,
        settings=ix.settings,
        llm_factory=lambda: llm,
    )
    out = CommunitiesStep(CommunitiesStep.Params(seed=1)).run(ctx)
    assert out["rebuilt"] and out["summaries"]["llm"] == out["communities"] > 0
    comms = list(store.iter_nodes(b, Label.COMMUNITY))
    assert {c.props["summary"] for c in comms} == {"Physicists in Paris."}
    assert all(c.props["summary_source"] == "llm" for c in comms)
    # a model that never answers valid JSON: extractive summaries, failures counted
    fake_openai.default = Reply(content="not json")
    fake_openai.responder = lambda body: "not json"
    uncached = cls(
        cls.Params(
            model="fake-summary", base_url=fake_openai.url + "/v1", cache=False, max_retries=0
        )
    )
    ctx.llm_factory = lambda: uncached
    n_requests = fake_openai.count("/chat/completions")
    out = CommunitiesStep(CommunitiesStep.Params(seed=2)).run(ctx)
    assert (
        fake_openai.count("/chat/completions") - n_requests == 2 * out["communities"]
    )  # one repair each
    assert out["summaries"]["llm_failures"] == out["communities"] == out["summaries"]["extractive"]
    assert all(
        c.props["summary"].startswith("Entities: ") for c in store.iter_nodes(b, Label.COMMUNITY)
    )
