"""The entity_graph step builds its edges on demand and writes them batch by batch; the
streamed layer holds the same edges as the built one, and every edge reaches the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphroute.core.api.components import Extraction
from graphroute.core.api.models import Label, Node
from graphroute.core.engine import open_store
from graphroute.plugins.graph_builders import entity_graph as eg


def _chunks() -> tuple[list[eg.ChunkInput], dict[str, Extraction]]:
    chunks, ex = [], {}
    for i in range(6):
        cid = f"c{i}"
        chunks.append(eg.ChunkInput(id=cid, doc_id=f"d{i % 3}", text="", sentences=[
            (f"{cid}/s0", f"Ada Lovelace met Charles Babbage in London {i}."),
            (f"{cid}/s1", "Babbage built the Analytical Engine."),
        ]))
        triples = [("Charles Babbage", "built", "Analytical Engine")] if i % 2 else []
        ex[cid] = Extraction(entities=["Ada Lovelace", "Charles Babbage", "London", "Analytical Engine"], triples=triples)
    return chunks, ex


def test_streamed_layer_equals_built_layer_and_is_written_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks, ex = _chunks()
    built = eg.build_entity_layer("g", chunks, ex)
    streamed = eg.stream_entity_layer("g", chunks, ex)
    first = list(streamed.iter_edges())
    assert first == built.edges and list(streamed.iter_edges()) == first  # repeatable
    assert streamed.edge_count == len(first) and streamed.entities == built.entities
    kinds = {(e.type, e.props.get("level")) for e in first}
    assert {("MENTIONS", "chunk"), ("MENTIONS", "sentence"), ("RELATION", None), ("CO_OCCURS", None)} <= kinds

    store = open_store(str(tmp_path / "store"))
    try:
        ids = {c.id for c in chunks} | {sid for c in chunks for sid, _ in c.sentences}
        store.write("g", nodes=[Node(id=i, label=Label.SENTENCE, group="g") for i in sorted(ids)] + streamed.entities)
        monkeypatch.setattr(eg, "EDGE_BATCH", 7)  # several batches from one iterator
        eg._write_edges(store, "g", streamed.iter_edges(), "entity edges", total=streamed.edge_count)
        stored = {(e.src, e.type, e.dst) for e in store.iter_edges("g")}
        assert stored == {(e.src, e.type, e.dst) for e in first}
    finally:
        store.close()
