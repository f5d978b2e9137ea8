"""Voyage and OpenAI embedders, voyage_rerank and the dimension check, with the real SDKs
against the loopback servers and the real embedded store."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from graphroute.core.api.models import Evidence, Node
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.errors import RemoteCallError
from graphroute.plugins.denoisers.rerank_remote import VoyageRerank
from graphroute.plugins.embedders.remote import (
    EmbeddingDimensionError,
    OpenAIEmbedder,
    VoyageEmbedder,
    check_dimension,
)
from graphroute.plugins.stores.embedded import EmbeddedStore

from tests.servers.fake_apis import FakeOpenAI, FakeVoyage, Reply


def _voyage(server: FakeVoyage, **kw: Any) -> VoyageEmbedder:
    params: dict[str, Any] = {"base_url": server.url + "/v1", "timeout": 2.0, "max_retries": 2, "backoff_s": 0.01}
    params.update(kw)
    return VoyageEmbedder(VoyageEmbedder.Params(**params))


DOCS = [
    ["Contoso Ltd. was founded in 1902.", "It makes kettles."],
    ["Fabrikam builds bridges.", "It makes kettles.", "Its office is in Oslo."],
]


def test_voyage_contextual_documents(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    emb = _voyage(fake_voyage)
    out = emb.embed_contextual(DOCS)
    assert [v.shape for v in out] == [(2, 1024), (3, 1024)]
    assert all(np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5) for v in out)
    # the same sentence embedded in two documents' contexts gets two different vectors
    assert not np.allclose(out[0][1], out[1][1])
    (req,) = fake_voyage.requests
    assert req.path == "/v1/contextualizedembeddings"
    assert req.body["inputs"] == DOCS and req.body["input_type"] == "document"
    assert req.body["model"] == "voyage-context-3"
    assert req.headers["authorization"] == f"Bearer {api_keys['voyage']}"
    assert emb.usage.data["tokens"] > 0 and emb.usage.data["cost_usd"] > 0


def test_voyage_query_and_output_dimension(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    emb = _voyage(fake_voyage, output_dimension=256)
    q = emb.embed_query("Who makes kettles?")
    assert q.shape == (256,) and emb.dimension == 256 and emb.model_id == "voyage:voyage-context-3:256"
    (req,) = fake_voyage.requests
    assert req.body["inputs"] == [["Who makes kettles?"]]
    assert req.body["input_type"] == "query" and req.body["output_dimension"] == 256
    # a query is closer to the document unit that shares its words
    docs = emb.embed_contextual(DOCS)
    assert float(docs[0][1] @ q) > float(docs[1][2] @ q)


def test_voyage_plain_model_uses_embeddings_endpoint(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    emb = _voyage(fake_voyage, model="voyage-3.5", batch_size=2)
    m = emb.embed(["a b", "c d", "e f"], input_type="document")
    assert m.shape == (3, 1024)
    assert [r.path for r in fake_voyage.requests] == ["/v1/embeddings", "/v1/embeddings"]
    assert fake_voyage.requests[0].body["input_type"] == "document"


def test_voyage_batches_documents_by_unit_count(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    docs = [[f"unit {i} of doc {d}" for i in range(400)] for d in range(3)]
    out = _voyage(fake_voyage).embed_contextual(docs)
    assert [len(v) for v in out] == [400, 400, 400]
    assert fake_voyage.count("/contextualizedembeddings") == 2  # <= 1000 units per request


def test_voyage_429_then_success(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    fake_voyage.script = [Reply(status=429), Reply()]
    emb = _voyage(fake_voyage)
    assert emb.embed_query("q").shape == (1024,)
    assert emb.usage.data["retries"] == 1 and fake_voyage.count() == 2


def test_voyage_500_exhausts_retries(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    fake_voyage.default = Reply(status=500)
    with pytest.raises(RemoteCallError) as err:
        _voyage(fake_voyage, max_retries=2).embed_query("q")
    assert err.value.status == 500 and fake_voyage.count() == 3


def test_voyage_timeout(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    fake_voyage.script = [Reply(delay=3.0), Reply()]
    emb = _voyage(fake_voyage, timeout=0.3, max_retries=1)
    assert emb.embed_query("q").shape == (1024,)
    fake_voyage.script = [Reply(delay=3.0)]
    with pytest.raises(RemoteCallError, match="Timeout"):
        _voyage(fake_voyage, timeout=0.3, max_retries=0).embed_query("q")


def test_voyage_key_never_logged(fake_voyage: FakeVoyage, api_keys: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_voyage.script = [Reply(status=429)]
    emb = _voyage(fake_voyage)
    emb.embed_query("q")
    fake_voyage.default = Reply(status=500)
    with pytest.raises(RemoteCallError) as err:
        _voyage(fake_voyage, max_retries=0).embed_query("z")
    for t in (caplog.text, repr(emb), repr(emb.params), str(err.value)):
        assert api_keys["voyage"] not in t


def test_openai_embedder(fake_openai: FakeOpenAI, api_keys: dict[str, str]) -> None:
    emb = OpenAIEmbedder(OpenAIEmbedder.Params(base_url=fake_openai.url + "/v1", dimensions=64, batch_size=2, backoff_s=0.01))
    fake_openai.script = [Reply(status=429), Reply()]
    m = emb.embed(["kettles and bridges", "bridges", "kettles"])
    assert m.shape == (3, 64) and emb.dimension == 64
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert float(m[0] @ m[1]) > 0.3 and float(m[1] @ m[2]) < float(m[0] @ m[1])
    assert fake_openai.count("/embeddings") == 3  # 429 retried, then two batches
    assert fake_openai.requests[-1].body["dimensions"] == 64
    assert emb.usage.data["retries"] == 1 and emb.usage.data["tokens"] == 5
    default = OpenAIEmbedder(OpenAIEmbedder.Params(base_url=fake_openai.url + "/v1"))
    assert default.embed_query("x").shape == (1536,)


def test_dimension_check_against_real_store(fake_voyage: FakeVoyage, api_keys: dict[str, str], tmp_path: Path) -> None:
    store = EmbeddedStore(str(tmp_path / "store"))
    try:
        ids = ["s1", "s2"]
        nodes = [Node(id=i, label="Sentence", group="g", doc_id="d", props={"text": i}) for i in ids]
        vecs = np.eye(2, 384, dtype=np.float32)
        store.write("g", nodes, vectors={"sentence": (ids, vecs)})
        emb = _voyage(fake_voyage)
        with pytest.raises(EmbeddingDimensionError) as err:
            check_dimension(store, "g", emb)
        msg = str(err.value)
        assert "384-d" in msg and "1024-d" in msg and "'g'" in msg and "re-index" in msg
        check_dimension(store, "g", _voyage(fake_voyage, output_dimension=384))  # matches: fine
        check_dimension(store, "empty", emb)  # nothing stored yet: fine
    finally:
        store.close()


def _ctx() -> StageContext:
    return StageContext(services=None, stage_id="rr")  # type: ignore[arg-type]  # unused by this stage


def test_voyage_rerank_stage(fake_voyage: FakeVoyage, api_keys: dict[str, str]) -> None:
    ev = [
        Evidence(id="a", text="Parking is free on weekends.", score=0.9),
        Evidence(id="b", text="The agent fee is 15% [paragraph, sim=0.7, doc=x].", score=0.5),
        Evidence(id="c", text="The fee for agents is listed in annex A.", score=0.4),
    ]
    state = QueryState(question="What is the agent fee", group="g", evidence=ev)
    ctx = _ctx()
    VoyageRerank(VoyageRerank.Params(base_url=fake_voyage.url + "/v1", top_k=2, backoff_s=0.01)).run(state, ctx)
    assert [e.id for e in state.evidence] == ["b", "c"]
    assert state.evidence[0].metadata["pre_rerank_score"] == 0.5
    (req,) = fake_voyage.requests
    assert req.path == "/v1/rerank" and req.body["top_k"] == 2 and req.body["model"] == "rerank-2.5"
    assert all("sim=" not in d for d in req.body["documents"])  # tags stripped before sending
    assert ctx.tokens["prompt"] > 0 and ctx.stats["cost_usd"] > 0 and ctx.stats["kept"] == 2


def test_voyage_rerank_registered_off_by_default_in_routes() -> None:
    routes = Path(__file__).resolve().parents[2] / "routes"
    for y in routes.glob("*.yaml"):
        text = y.read_text()
        if "voyage_rerank" in text:
            import yaml

            cfg = yaml.safe_load(text)
            for st in cfg.get("stages", []):
                if isinstance(st, dict) and st.get("use") == "voyage_rerank":
                    assert st.get("enabled") is False, f"{y.name} enables voyage_rerank"
