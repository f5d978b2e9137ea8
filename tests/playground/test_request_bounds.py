"""What one playground request may cost: its `--set` items and pasted route files are refused
with a short message when they are too large, too deep or expanding, never run unbounded."""

from __future__ import annotations

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
