"""What one playground request may cost: its `--set` items and pasted route files are refused
with a short message when they are too large, too deep or expanding, never run unbounded."""

from __future__ import annotations

import time

import pytest

from tests.playground.conftest import Served

BIG = 300_000  # characters: far above any limit, under the server's body limit


@pytest.mark.parametrize(
    "config",
    [
        {"route": "route2_local", "set": ["ppr.top_k=" + "x" * BIG]},
        {"route": "route2_local", "set": ["x" * BIG]},
        {"route": "route2_local", "disable": ["d" * BIG]},
    ],
    ids=["value", "item", "stage-id"],
)
def test_an_error_repeats_a_short_prefix_of_a_huge_set(served: Served, config: dict) -> None:
    with served.client() as c:
        r = c.post("/playground/resolve", json={"config": config})
    assert r.status_code in (200, 400), r.text[:300]
    assert len(r.content) < 3000, r.text[:300]


def alias_chain(levels: int) -> str:
    """A YAML value of ~45 bytes a level that expands ninefold with each: 9**levels items."""
    parts = ["&a0 [x, x, x, x, x, x, x, x, x]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


def test_a_yaml_alias_chain_in_a_set_is_refused_not_expanded(served: Served) -> None:
    # six levels expand to 531,441 items: a 3 MB error body before the fix; nine would be 2 GB
    config = {"route": "route2_local", "set": ["ppr.top_k=" + alias_chain(6)]}
    with served.client() as c:
        r = c.post("/playground/resolve", json={"config": config})
        q = c.post("/playground/query", json={"question": "What is the monthly management fee?", "config": config})
    assert len(r.content) < 3000 and len(q.content) < 3000, (len(r.content), len(q.content))
    assert q.status_code == 400, q.text[:300]
    for message in (q.json()["message"], r.json()["errors"][0]["message"]):
        assert "--set ppr.top_k: YAML aliases (*name) are not accepted here" in message


@pytest.mark.parametrize("endpoint", ["/playground/resolve", "/playground/query"])
def test_deeply_nested_yaml_in_a_set_is_refused(served: Served, endpoint: str) -> None:
    config = {"route": "route2_local", "set": ["ppr.top_k=" + "[" * 50_000 + "]" * 50_000]}
    with served.client() as c:
        r = c.post(endpoint, json={"question": "What is the monthly management fee?", "config": config})
    assert r.status_code in (200, 400), r.text[:300]  # not a 500 (RecursionError)
    message = r.json()["message"] if r.status_code == 400 else r.json()["errors"][0]["message"]
    assert "nests more than 32 levels deep" in message


def test_a_deeply_nested_pasted_route_is_refused_at_once(served: Served) -> None:
    text = "name: x\nextends: route2_local\nstages: " + "[" * 49_000 + "]" * 49_000
    with served.client() as c:
        t0 = time.perf_counter()
        r = c.post("/playground/import", json={"yaml": text})
        took = time.perf_counter() - t0
    assert r.status_code == 400, r.text[:300]  # was a RecursionError, after >10 s of scanning
    assert "nests more than 32 levels deep" in r.json()["message"] and "<pasted route>:3" in r.json()["message"]
    assert took < 3.0, took


def test_the_playground_cannot_set_where_a_stage_connects(served: Served) -> None:
    config = {"route": "route2_local", "set": ["ner_seeds.llm=openai", "ner_seeds.llm_params={base_url: 'http://127.0.0.1:9/v1', api_key_env: NEO4J_PASSWORD}"]}
    with served.client() as c:
        q = c.post("/playground/query", json={"question": "What is the monthly management fee?", "config": config})
        r = c.post("/playground/resolve", json={"config": config}).json()
    assert q.status_code == 400 and "cannot be set in a request" in q.json()["message"], q.text
    assert not r["ok"] and {(e["stage"], e["param"]) for e in r["errors"]} == {("ner_seeds", "llm"), ("ner_seeds", "llm_params")}
