"""``graphroute perf graph-gen`` and ``ppr-equivalence`` on a small generated group.

The generator writes what the indexer would (skeletons, the entity layer, vectors) without a
model; its counts must agree with what the store holds, its questions must name entities
the store resolves, and the local PPR must rank as the exact solver on it.
"""

from __future__ import annotations

from pathlib import Path

from graphroute.core.api.models import EdgeType, Label
from graphroute.core.apps.perf import perf as P
from graphroute.core.apps.perf.graphgen import GraphSpec, questions, write_graph
from graphroute.core.apps.perf.ppr_equivalence import ppr_equivalence
from graphroute.core.lib.entities import OWN_PAGES_META
from graphroute.plugins.expanders.graph import DEFAULT_PUSH_EPS

SPEC = GraphSpec(sentences=1_500, topics=4, entities=400, hubs=5, dim=384, seed=3)


def test_graph_gen_writes_its_spec_and_push_ranks_as_the_exact_solver(tmp_path: Path) -> None:
    gr = P._engine(str(tmp_path / "store"), "gen", tmp_path / "cache")
    try:
        result = write_graph(gr.store, "gen", SPEC)
        counts = gr.store.counts("gen")
        written = result["written"]
        assert counts["nodes"][Label.SENTENCE] == written["sentences"] == SPEC.sentences
        assert counts["nodes"][Label.CHUNK] == written["chunks"] == written["documents"]
        assert counts["nodes"][Label.ENTITY] == written["entities"] > SPEC.hubs
        assert counts["edges"][EdgeType.MENTIONS] == written["mentions"]
        assert counts["edges"][EdgeType.CO_OCCURS] == written["co_occurs"]
        assert counts["vectors"]["sentence"] == SPEC.sentences
        assert gr.store.get_meta("gen", "graphgen")["sentences"] == SPEC.sentences
        # own pages are written (none: no generated title names an entity), so the push may walk them
        assert counts["edges"].get(EdgeType.OWN_PAGE, 0) == written["own_page_edges"] == 0
        assert gr.store.get_meta("gen", OWN_PAGES_META) == {"edges": 0}

        qs = questions(SPEC, 4)
        assert len(qs) == 4
        seen: list[tuple[str, dict]] = []
        eq = ppr_equivalence(gr, ["route2_local"], qs, eps=DEFAULT_PUSH_EPS, on_row=lambda name, row: seen.append((name, row)))
        r = eq["routes"]["route2_local"]
        assert r["questions"] == 4  # every question resolved seeds and reached ppr
        # each comparison was handed over as it was made, the same rows the summary holds
        assert seen == [("route2_local", row) for row in r["per_question"]]
        assert r["entity_overlap_mean"] >= 0.9 and r["chunk_overlap_mean"] >= 0.9
        # the push read part of the graph only
        assert 0 < r["nodes_touched_p50"] < sum(counts["nodes"].values())
    finally:
        gr.close()
