"""Fixtures: a real embedded store with a few sentences, test routes, and the app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core import GraphRoute, Node
from graphroute.core.apps.serve.server import ServerConfig, create_app
from graphroute.core.registry import build_registry

from tests.server import stages

SENTENCES = {
    "d1": ("Travel policy", ["Travel requests are approved by the department head.",
                             "Receipts must be filed within thirty days."]),
    "d2": ("Security handbook", ["Badges must be worn at all times on site.",
                                 "Lost badges are reported to the security desk."]),
}

ROUTES = {
    "t_route": "name: t_route\ndescription: word overlap then first sentence\nstages:\n"
               "  - use: t_overlap\n    id: overlap\n    with: {top_k: 3}\n  - use: t_answer\n    id: answer\n",
    "t_slow": "name: t_slow\ndescription: sleeps\nstages:\n  - use: t_overlap\n"
              "  - use: t_sleep\n    id: sleep\n    with: {seconds: 3}\n  - use: t_answer\n",
    "t_spin": "name: t_spin\ndescription: works in steps until its deadline\nstages:\n  - use: t_overlap\n"
              "  - use: t_spin\n    id: spin\n    with: {seconds: 30}\n  - use: t_answer\n",
}


@pytest.fixture
def routes_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "routes"
    d.mkdir()
    for name, text in ROUTES.items():
        (d / f"{name}.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_ROUTES", str(d))
    for key in [k for k in __import__("os").environ if k.startswith("GRAPHROUTE__")]:
        monkeypatch.delenv(key)
    return d


@pytest.fixture
def engine(tmp_path: Path, routes_dir: Path) -> Iterator[GraphRoute]:
    registry = build_registry(entry_points=False, extra_plugins=[stages])
    gr = GraphRoute(store=str(tmp_path / "store"), group="docs", registry=registry)
    for doc_id, (title, sents) in SENTENCES.items():
        nodes = [Node(id=f"{doc_id}:s{i}", label="Sentence", group="docs", doc_id=doc_id,
                      props={"text": s, "document": title}) for i, s in enumerate(sents)]
        gr.store.write("docs", nodes)
    yield gr
    gr.close()


def make_app(engine: GraphRoute, **config: object):  # type: ignore[no-untyped-def]
    cfg = ServerConfig(**{"max_body_bytes": 4096, "request_timeout_s": 20.0, **config})  # type: ignore[arg-type]
    return create_app(cfg, engine)
