"""GraphStore.search_text and the bm25 stage on every backend: Neo4j ranks the group's
chunks in its full-text index (nothing of the group is read into the client), the embedded
store has no text index and the stage ranks with bm25s in the client; both find the same
chunk first."""

from __future__ import annotations

import pytest
from graphroute.core.api.models import Label, Node
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.query.services import Services
from graphroute.plugins.baselines.lexical import BM25Search

TOPICS = ["glaciers carve fjords", "volcanoes erupt lava", "rivers deposit silt", "deserts shift dunes"]


def chunks(group: str, n: int, prefix: str = "c") -> list[Node]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        out.append(Node(id=f"{prefix}{i:03d}", label=Label.CHUNK, group=group, doc_id=f"d{i}",
                        props={"text": f"Chunk {i}: {topic} over the years.", "document": f"Report {i}", "index": 0}))
        out.append(Node(id=f"{prefix}{i:03d}/s", label=Label.SENTENCE, group=group, doc_id=f"d{i}",
                        props={"text": "Glaciers glaciers glaciers carve fjords."}))  # sentences are not indexed
    return out


def test_full_text_search_keeps_to_the_group(store: GraphStore, make_group: object) -> None:
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    store.write(group, chunks(group, 8))
    store.write(crowd, chunks(crowd, 300, prefix="x"))  # the same words, many more chunks
    hits = store.search_text(group, "Which glacier carved the fjords?", 3)
    if store.backend == "embedded":
        assert hits is None  # no text index: the stage ranks in the client
    else:
        assert hits is not None and len(hits) == 2  # the two glacier chunks of this group, no others
        assert {h for h, _ in hits} == {"c000", "c004"} and all(s > 0 for _, s in hits)
        assert store.search_text(group, "what?!", 3) == [] and store.search_text(group, "lava", 0) == []
    state = QueryState("Which glacier carved the fjords?", group)
    ctx = StageContext(services=Services(store, group), stage_id="bm25")
    BM25Search(BM25Search.Params(top_k=3)).run(state, ctx)
    assert {e.id for e in state.evidence[:2]} == {"c000", "c004"}
    assert state.evidence[0].document.startswith("Report") and "glaciers" in state.evidence[0].text
    assert ctx.stats["engine"] == ("bm25s in the client" if store.backend == "embedded" else "store full-text index")


def test_a_full_text_fetch_learns_the_groups_share_and_still_finds_a_crowded_group(
    store: GraphStore, make_group: object
) -> None:
    """Neo4j asks its full-text index for k over the group's share of the hits it saw
    lately (1.5 k for a group alone), and asks again for more when another group's hits
    crowd the group's out of that fetch."""
    if store.backend == "embedded":
        pytest.skip("the embedded store has no text index")
    from graphroute.plugins.stores.neo4j_store import Neo4jStore

    assert isinstance(store, Neo4jStore)
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    store.write(group, chunks(group, 8, prefix="lone"))
    index = "gr_text"
    assert store._text_fetch(index, group, 10) == 10 * store.oversample  # nothing seen yet
    # words only this group holds: every hit is the group's
    assert {h for h, _ in store.search_text(group, "lone words: Chunk 0 glaciers", 3) or []} >= {"lone000"}
    store._text_shares[(index, group)] = 1.0
    assert store._text_fetch(index, group, 10) == 15
    store.write(crowd, chunks(crowd, 300, prefix="x"))  # the same words, many more chunks
    hits = store.search_text(group, "Which glacier carved the fjords?", 3)
    assert hits is not None and {h for h, _ in hits} == {"lone000", "lone004"}
    assert store._text_shares[(index, group)] < 0.5  # the fetches that held the crowd taught the share
    assert store._text_fetch(index, group, 10) > 30


def test_passage_seeds_from_bm25_rank_as_the_bm25_stage(
    store: GraphStore, make_group: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """passage_seeds with ``source: bm25`` takes the bm25 stage's ranking: the store's
    full-text index on Neo4j (no client-side index of the group is built), bm25s on the
    embedded store."""
    from graphroute.plugins.baselines import lexical
    from graphroute.plugins.seeds.tiers import PassageSeeds

    group = make_group()  # type: ignore[operator]
    store.write(group, chunks(group, 12))
    built: list[str] = []
    real = lexical.lexical_index

    def counted(store: GraphStore, group: str, **kw: object) -> object:
        built.append(group)
        return real(store, group, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(lexical, "lexical_index", counted)
    state = QueryState("Which volcano erupted lava?", group)
    ctx = StageContext(services=Services(store, group), stage_id="passage_seeds")
    PassageSeeds(PassageSeeds.Params(top_k=3, source="bm25")).run(state, ctx)
    seeded = set(state.seed_arrays[0].node_ids)
    assert seeded == {"c001", "c005", "c009"}
    assert bool(built) == (store.backend == "embedded")  # a client-side index only without a text index


def test_sentences_rank_in_their_own_index_and_a_group_written_before_it_falls_back(store: GraphStore, make_group: object) -> None:
    """bm25 ``unit: sentence``: Neo4j ranks the group's sentences in a full-text index of
    their own (chunks' searches never see them); on a group whose sentences were written
    before that index existed it ranks them in the client, as the embedded store does."""
    group = make_group()  # type: ignore[operator]
    store.write(group, chunks(group, 8))
    question = "Which glaciers carved fjords?"
    hits = store.search_text(group, question, 3, label=Label.SENTENCE)
    assert store.search_text(group, question, 3, label=Label.DOCUMENT) is None  # no index of documents
    if store.backend == "embedded":
        assert hits is None and store.upgrade_group(group) == []  # nothing to bring up to date
    else:
        assert hits is not None and {h for h, _ in hits} <= {f"c{i:03d}/s" for i in range(8)} and len(hits) == 3
        assert not any(h.endswith("/s") for h, _ in store.search_text(group, question, 20) or [])
    state = QueryState(question, group)
    ctx = StageContext(services=Services(store, group), stage_id="bm25")
    BM25Search(BM25Search.Params(top_k=3, unit="sentence")).run(state, ctx)
    assert len(state.evidence) == 3 and all(e.id.endswith("/s") and e.kind == "sentence" for e in state.evidence)
    assert ctx.stats["engine"] == ("bm25s in the client" if store.backend == "embedded" else "store full-text index")
    if store.backend == "neo4j":  # the group as a server before the sentence index left it
        store._write_tx(  # type: ignore[attr-defined]
            "test", lambda tx: tx.run("MATCH (m:GRMeta {group: $g}) REMOVE m.sentence_text", g=group).consume()
        )
        assert store.search_text(group, question, 3, label=Label.SENTENCE) is None
        state, ctx = QueryState(question, group), StageContext(services=Services(store, group), stage_id="bm25")
        BM25Search(BM25Search.Params(top_k=3, unit="sentence")).run(state, ctx)
        assert ctx.stats["engine"] == "bm25s in the client" and len(state.evidence) == 3
        # such a group's sentences have no indexed text either; the next index run's
        # upgrade_group indexes it and sets the flag, and the server ranks them again
        store._write_tx(  # type: ignore[attr-defined]
            "test", lambda tx: tx.run("MATCH (n:GRNode {group: $g}) REMOVE n.p_sentence", g=group).consume()
        )
        version = store.version(group)
        assert store.upgrade_group(group) == ["indexed the text of 8 sentences in gr_sentence_text"]
        assert store.version(group) > version and store.upgrade_group(group) == []
        # the server ranks them again: three of the group's sentences (all eight have the same
        # text, so which three is the index's tie-break, which a re-index may change)
        again = store.search_text(group, question, 3, label=Label.SENTENCE)
        assert again is not None and len(again) == 3 and {h for h, _ in again} <= {f"c{i:03d}/s" for i in range(8)}
        store.delete_group(group)  # an emptied group's next sentences are all indexed again
        store.write(group, chunks(group, 4))
        assert store.search_text(group, question, 3, label=Label.SENTENCE)
