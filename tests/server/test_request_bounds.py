"""What one request may cost: a hostile or careless client's values are refused with a short
message naming the parameter and its limit, and never make the server do unbounded work."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute

from tests.server.conftest import make_app

BIG = 300_000  # characters: far above any limit, well under the body limit the client gets


@pytest.fixture
def client(engine: GraphRoute) -> TestClient:
    return TestClient(make_app(engine, max_body_bytes=2_000_000))


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"overlap.top_k": "9" * BIG}, "top_k"),  # a value
        ({"overlap.top_k": list(range(BIG // 8))}, "top_k"),  # a value that is not text
        ({"overlap": {"p" * BIG: 1}}, "parameter name"),
        ({"s" * BIG: {"top_k": 1}}, "stage id"),
        ({"o" * BIG + ".top_k": 1}, "stage id"),
        ({"k" * BIG: 1}, "bad override key"),
    ],
    ids=["value", "list-value", "param-name", "stage-id", "dotted-stage-id", "bad-key"],
)
def test_an_error_repeats_a_short_prefix_of_a_huge_override(client: TestClient, overrides: dict, says: str) -> None:
    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": overrides})
    assert r.status_code == 400, r.text[:300]
    assert says in r.json()["message"]
    assert len(r.content) < 3000, r.text[:300]


@pytest.mark.parametrize("shape", ["dotted", "nested"])
def test_a_deeply_nested_override_value_is_refused(client: TestClient, shape: str) -> None:
    value = json.loads("[" * 600 + "]" * 600)  # deep enough to exhaust the recursive copy
    overrides = {"overlap.top_k": value} if shape == "dotted" else {"overlap": {"top_k": value}}
    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": overrides})
    assert r.status_code == 400, r.text[:300]  # was a 500 (RecursionError)
    assert r.json()["message"] == (
        "<route>: stage 'overlap': API overrides: the value of overlap.top_k nests more than 32 levels deep\n"
        "  fix: a stage's parameters are a few levels deep; write the value flatter"
    )
