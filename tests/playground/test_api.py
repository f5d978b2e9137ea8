"""The playground's API over the real sample-corpus index: token rules, the stage view, CLI
messages, YAML and command export and import, the graph neighbourhood, A/B and question sets."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from graphroute.core.api.constants import DEFAULT_ROUTE
from graphroute.core.api.models import EdgeType, Label
from graphroute.core.apps.bench import metrics as M
from graphroute.core.apps.bench.bench import aggregate
from graphroute.core.apps.serve.server import redact_paths
from graphroute.core.config.overrides import overrides_from_cli
from graphroute.core.config.resolve import load_route

from tests.playground.conftest import GROUP, TOKEN, Served, free_port

GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")
STATIC = Path(__file__).resolve().parents[2] / "core" / "apps" / "serve" / "playground" / "static"
QUESTION = "What is the monthly management fee?"


def cfg(route: str = "route2_reference", set_: list[str] | None = None, disable: list[str] | None = None,
        enable: list[str] | None = None) -> dict[str, Any]:
    return {"route": route, "set": set_ or [], "disable": disable or [], "enable": enable or []}


def resolved_params(route: str, registry: Any, **ov: list[str]) -> tuple[dict[str, Any], dict[str, bool]]:
    r = load_route(route, registry, overrides=overrides_from_cli(ov.get("set_", []), ov.get("disable", []), ov.get("enable", [])))
    return {s.spec.key: s.spec.with_ for s in r.stages()}, {s.spec.key: s.spec.enabled for s in r.stages()}


# --------------------------------------------------------------------------- serving


def test_page_is_public_and_its_api_needs_the_token(served: Served) -> None:
    page = httpx.get(served.base + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert 'src="playground/static/playground.js"' in page.text
    js = httpx.get(served.base + "/playground/static/playground.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert httpx.get(served.base + "/playground/static/../__init__.py").status_code == 404

    r = httpx.get(served.base + "/playground/info")
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = httpx.post(served.base + "/playground/query", json={"question": "q", "config": cfg()},
                   headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    with served.client() as c:
        assert c.get("/playground/info").json() == {"groups": [GROUP], "group": GROUP, "route": "route1_vector"}


def test_the_page_loads_nothing_from_outside_the_server() -> None:
    """Every asset is a file of the package; the only absolute URL is the SVG namespace."""
    files = sorted(STATIC.iterdir())
    assert {f.name for f in files} >= {"index.html", "playground.js", "playground.css", "graph.js", "render.js", "dom.js"}
    for f in files:
        text = f.read_text(encoding="utf-8")
        urls = set(re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[a-z]{2,}[^\s'\")]*", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (f.name, urls)
        assert "@import" not in text and "url(http" not in text
    imports = re.findall(r"from '([^']+)'", (STATIC / "playground.js").read_text(encoding="utf-8"))
    assert imports and all(i.startswith("./") and (STATIC / i[2:]).is_file() for i in imports)


def test_graphroute_serve_shows_the_page_at_the_root(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "GRAPHROUTE_TOKEN": TOKEN, "GRAPHROUTE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [GRAPHROUTE, "serve", "--store", str(tmp_path / "store"), "--port", str(port), "--no-preload"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "graphroute serve exited"
            try:
                page = httpx.get(base + "/", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "graphroute serve did not come up"
                time.sleep(0.2)
        assert page.status_code == 200 and "<title>graphroute playground</title>" in page.text
        assert httpx.get(base + "/playground/static/graph.js").status_code == 200
        assert httpx.get(base + "/playground/info").status_code == 401
        info = httpx.get(base + "/playground/info", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert info["groups"] == [] and info["route"] == DEFAULT_ROUTE
    finally:
        proc.terminate()
        proc.wait(timeout=15)


# --------------------------------------------------------------------------- the route view


def test_route_view_lists_the_resolved_stages_in_order(served: Served) -> None:
    resolved = load_route("route2_reference", served.engine.registry)
    with served.client() as c:
        view = c.get("/playground/routes/route2_reference").json()
        assert [s["id"] for s in view["stages"]] == [s.spec.key for s in resolved.stages()]
        stages = {s["id"]: s for s in view["stages"]}
        assert stages["vector_fallback"]["enabled"] is False and stages["score_gap"]["enabled"] is True
        threshold = {p["name"]: p for p in stages["score_gap"]["params"]}["threshold"]
        assert (threshold["value"], threshold["text"], threshold["widget"]) == (0.5, "0.5", "number")
        assert threshold["maximum"] == 1.0 and "gap" in threshold["description"]
        solver = {p["name"]: p for p in stages["ppr"]["params"]}["solver"]
        assert solver["widget"] == "choice" and solver["value"] == "cg" and "power" in solver["choices"]
        damping = {p["name"]: p for p in stages["ppr"]["params"]}["damping"]
        assert damping["nullable"] and damping["widget"] == "number"
        r5 = c.get("/playground/routes/route5_unified").json()
        assert [b["id"] for b in r5["blocks"]] == ["retrieve"]
        assert {s["id"] for s in r5["stages"] if s["block"] == "retrieve"} == set(r5["blocks"][0]["stages"])
        missing = c.get("/playground/routes/route2_locall")
        assert missing.status_code == 404 and "did you mean route2_local" in missing.json()["message"]


# --------------------------------------------------------------------------- validation


def cli_errors(*calls: list[str]) -> list[str]:
    """What `graphroute routes show ROUTE ...` prints for each bad configuration (the same
    loader `graphroute query` runs before it opens the store); the commands run side by side."""
    procs = [subprocess.Popen([GRAPHROUTE, "routes", "show", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "COLUMNS": "400"}) for args in calls]
    out = []
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2, err
        out.append(err.strip().removeprefix("route config error: "))
    return out


def test_errors_are_the_cli_messages_one_per_field(served: Served) -> None:
    body = {"config": cfg(set_=["score_gap.threshold=abc", "ppr.top_k=0", "score_gap.min_keep=3"], disable=["ner_seeds"])}
    with served.client() as c:
        res = c.post("/playground/resolve", json=body).json()
    assert res["ok"] is False and res["yaml"] is None
    by_field = {(e["stage"], e["param"]): e["message"] for e in res["errors"]}
    assert set(by_field) == {("score_gap", "threshold"), ("ppr", "top_k"), ("seed_resolution", None)}
    # the CLI's messages, with the route file named by its last part as every API message names it
    assert [by_field[("score_gap", "threshold")], by_field[("seed_resolution", None)]] == [redact_paths(m) for m in cli_errors(
        ["route2_reference", "--set", "score_gap.threshold=abc"], ["route2_reference", "--disable", "ner_seeds"])]
    assert by_field[("score_gap", "threshold")].startswith("route2_reference.yaml:")
    assert "bad value for `top_k` of stage `ppr`" in by_field[("ppr", "top_k")]
    with served.client() as c:
        unknown = c.post("/playground/resolve", json={"config": cfg(set_=["score_gapp.threshold=0.4"])}).json()
        assert "did you mean 'score_gap'?" in unknown["errors"][0]["message"]
        r = c.post("/playground/query", json={"question": QUESTION, "config": cfg(set_=["score_gap.threshold=abc"])})
        assert r.status_code == 400 and r.json()["error"] == "route_config"


# --------------------------------------------------------------------------- export and import


def test_yaml_and_command_reproduce_the_configuration(served: Served, tmp_path: Path) -> None:
    changes = {"set_": ["score_gap.threshold=0.3", "ppr.damping=0.8", "ppr.solver=power", "md5_dedup.enabled=true"],
               "disable": ["community_filter"], "enable": ["vector_fallback"]}
    body = {"config": cfg("route2_reference", changes["set_"], changes["disable"], changes["enable"]), "question": "Who's the owner?", "group": GROUP}
    with served.client() as c:
        res = c.post("/playground/resolve", json=body).json()
    assert res.get("ok"), res
    assert res["changed"] == {"ppr": ["damping", "solver"], "community_filter": ["enabled"], "score_gap": ["threshold"],
                              "vector_fallback": ["enabled"]}
    doc = yaml.safe_load(res["yaml"])
    assert doc["extends"] == "route2_reference"
    assert doc["stages"] == [  # only the changed stages, in route order, only what changed
        {"id": "ppr", "with": {"damping": 0.8, "solver": "power"}},
        {"id": "community_filter", "enabled": False},
        {"id": "score_gap", "with": {"threshold": 0.3}},
        {"id": "vector_fallback", "enabled": True},
    ]
    expected = resolved_params("route2_reference", served.engine.registry, **changes)
    route_file = tmp_path / "mine.yaml"
    route_file.write_text(res["yaml"], encoding="utf-8")
    assert resolved_params(str(route_file), served.engine.registry) == expected

    args = shlex.split(res["command"])
    assert args[:7] == ["graphroute", "query", "Who's the owner?", "--group", GROUP, "--route", "route2_reference"]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    dis = [args[i + 1] for i, a in enumerate(args) if a == "--disable"]
    ena = [args[i + 1] for i, a in enumerate(args) if a == "--enable"]
    assert resolved_params("route2_reference", served.engine.registry, set_=sets, disable=dis, enable=ena) == expected

    with served.client() as c:  # the route file reads back into the same configuration
        back = c.post("/playground/import", json={"yaml": res["yaml"]}).json()
        assert back["name"] == "route2_reference_custom" and back["config"]["route"] == "route2_reference"
        assert back["config"]["disable"] == ["community_filter"] and back["config"]["enable"] == ["vector_fallback"]
        again = c.post("/playground/resolve", json={"config": back["config"]}).json()
    assert again["yaml"] == res["yaml"]


@pytest.mark.parametrize(("text", "needle"), [
    ("name: x\nstages:\n  - use: bm25\n", "has no `extends`"),
    ("name: x\nextends: route2_reference\nstages:\n  - use: bm25\n    id: extra\n    after: ppr\n", "'extra' is not a stage"),
    ("name: x\nextends: route2_reference\nstages:\n  - id: ppr\n    use: bm25\n", "moves or replaces"),
    ("name: x\nextends: ../route2_reference.yaml\nstages: []\n", "must name a route"),
    ("name: x\nextends: route2_reference\nstages:\n  - id: ppr\n    with: &a {damping: 0.8}\n  - id: score_gap\n    with: *a\n", "aliases"),
    ("name: x\nextends: route2_reference\nstages:\n  - id: ppr\n    with: {damping: 2}\n", "bad value for `damping`"),
    ("name: x\nextends: route2_reference\nstages: [\n", "malformed YAML"),
])
def test_import_refuses_what_the_playground_cannot_show(served: Served, text: str, needle: str) -> None:
    with served.client() as c:
        r = c.post("/playground/import", json={"yaml": text})
    assert r.status_code == 400 and r.json()["error"] == "route_config", r.text
    assert needle in r.json()["message"] and "<pasted route>" in r.json()["message"]


# --------------------------------------------------------------------------- runs


def test_the_graph_is_what_the_route_used(served: Served) -> None:
    with served.client() as c:
        run = c.post("/playground/query", json={"question": QUESTION, "group": GROUP, "config": cfg()}).json()
    result, graph = run["result"], run["graph"]
    nodes = {n["id"]: n for n in graph["nodes"]}
    trace = {t["stage"]: t["stats"] for t in result["trace"]}
    seeded = {s["node"] for s in trace["seed_resolution"]["seeds"]} | {p["node"] for p in trace["community_peers"]["peers"]}
    seeds = {i for i, n in nodes.items() if "seed" in n["roles"]}
    ranked = [n for n in graph["nodes"] if "ranked" in n["roles"]]
    passages = {i for i, n in nodes.items() if "passage" in n["roles"]}
    assert seeds and seeds <= seeded
    assert ranked and all(n["label"] == Label.ENTITY and n["score"] > 0 for n in ranked)
    assert {t["entity"] for t in trace["ppr"]["top"]} & {n["name"] for n in ranked}
    assert passages == {e["id"] for e in result["evidence"]}
    store = served.engine.store
    real = {(e.src, e.dst, e.type) for e in store.edges_of(GROUP, list(nodes), None, "out")}
    assert graph["edges"] and any(e["type"] == EdgeType.MENTIONS for e in graph["edges"])
    for e in graph["edges"]:
        assert (e["src"], e["dst"], e["type"]) in real or (e["dst"], e["src"], e["type"]) in real
    assert run["params"]["score_gap"]["threshold"] == 0.5 and run["enabled"]["vector_fallback"] is False


def test_ab_reports_what_b_changed(served: Served) -> None:
    b = cfg(disable=["score_gap", "community_filter"])
    with served.client() as c:
        ab = c.post("/playground/ab", json={"question": QUESTION, "group": GROUP, "a": cfg(), "b": b}).json()
        alone_a = c.post("/query", json={"question": QUESTION, "route": "route2_reference", "group": GROUP}).json()
        alone_b = c.post("/query", json={"question": QUESTION, "route": "route2_reference", "group": GROUP,
                                         "overrides": {"score_gap.enabled": False, "community_filter.enabled": False}}).json()
    ids_a = [e["id"] for e in alone_a["evidence"]]
    ids_b = [e["id"] for e in alone_b["evidence"]]
    diff = ab["diff"]
    assert [e["id"] for e in diff["entered"]] == [i for i in ids_b if i not in ids_a]
    assert [e["id"] for e in diff["left"]] == [i for i in ids_a if i not in ids_b]
    assert diff["entered"] or diff["left"], "switching the two denoisers off changes the evidence here"
    rows = {r["stage"]: r for r in diff["stages"]}
    assert "enabled" in rows["score_gap"]["changes"] and "enabled" in rows["community_filter"]["changes"]
    assert rows["ner_seeds"]["changes"] == [] and rows["ppr"]["changes"] == []  # upstream of the switch
    assert [t["stage"] for t in ab["b"]["result"]["trace"]] == [t["stage"] for t in alone_b["trace"]]


SET = [
    {"id": "fee", "question": "What is the monthly management fee?", "answer": "8% of the gross rent",
     "gold": ["Property Management Agreement"]},
    {"id": "total", "question": "What is the total amount due on invoice HV-2024-017?", "answer": "$686.50",
     "gold": ["Invoice HV-2024-017"]},
    {"id": "warranty", "question": "How long does the Harborview appliance warranty last?", "answer": "two years",
     "aliases": ["2 years"], "gold": ["Harborview Home Appliance Warranty", "No such document"]},
]


def test_question_set_is_scored_with_the_bench_metrics(served: Served) -> None:
    body = {"group": GROUP, "a": cfg(), "b": cfg(disable=["score_gap", "community_filter"]), "questions": SET}
    with served.client() as c:
        res = c.post("/playground/ab/questions", json=body).json()
    titles = res["documents"]
    assert sorted(titles) == ["Harborview Home Appliance Warranty", "Invoice HV-2024-017", "Property Management Agreement"]
    assert res["unresolved_gold"] == ["No such document"]
    cmp = res["comparison"]
    assert cmp["verdict"] in ("KEEP", "REVERT") and cmp["b"]["enabled"] == {"community_filter": False, "score_gap": False}
    for side in ("a", "b"):
        records = res[side]
        assert [r["id"] for r in records] == ["fee", "total", "warranty"]
        for rec, q in zip(records, SET, strict=True):
            golds = [titles.index(t) for t in q["gold"] if t in titles]
            assert rec["gold"] == golds
            answers = [q["answer"], *q.get("aliases", [])]
            assert rec["f1"] == M.f1_score(rec["answer"], answers)
            assert rec["recall@2"] == M.recall_at_k(rec["ranked"], golds, 2)
        metrics = cmp[side]["metrics"]
        agg = aggregate(records)
        assert {k: metrics[k] for k in agg} == agg  # the bench's aggregate of these records
        assert metrics["questions"] == 3
    assert cmp["deltas"]["f1"] == round(cmp["b"]["metrics"]["f1"] - cmp["a"]["metrics"]["f1"], 4)
    assert res["higher_is_better"]["recall@5"] is True


def test_unknown_group_and_route(served: Served) -> None:
    with served.client() as c:
        r = c.post("/playground/query", json={"question": QUESTION, "group": "nope", "config": cfg()})
        assert r.status_code == 404 and r.json()["error"] == "unknown_group"
        r = c.post("/playground/ab", json={"question": QUESTION, "a": cfg(), "b": cfg("route2_locl")})
        assert r.status_code == 400 and "did you mean route2_local" in r.json()["message"]
        r = c.post("/playground/query", json={"question": "   ", "config": cfg()})
        assert r.status_code == 400 and r.json()["message"] == "the question is empty"


BLOCKS = """\
name: t_blocks
stages:
  - id: first
    merge: union
    parallel:
      - - use: t_overlap
          id: o1
      - - use: t_overlap
          id: o2
          with: {top_k: 2}
  - id: second
    merge: rrf
    parallel:
      - - use: t_overlap
          id: o3
  - use: t_answer
    id: answer
"""


def test_a_switched_parallel_block_is_exported_whole_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphroute.core.apps.serve.playground import (
        PlaygroundConfig,
        changes,
        export_yaml,
        import_config,
    )
    from graphroute.core.config.route import find_route
    from graphroute.core.registry import build_registry

    from tests.server import stages

    registry = build_registry(entry_points=False, extra_plugins=[stages])
    (tmp_path / "t_blocks.yaml").write_text(BLOCKS, encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_ROUTES", str(tmp_path))
    config = PlaygroundConfig(route="t_blocks", set_=["o1.top_k=5", "o3.top_k=1"], disable=["second"])
    base, current = load_route("t_blocks", registry), load_route("t_blocks", registry, overrides=config.overrides())
    changed = changes(base, current)
    assert changed == {"second": ["enabled"], "o1": ["top_k"], "o3": ["top_k"]}
    text = export_yaml(base, current, changed)
    doc = yaml.safe_load(text)
    assert doc["stages"][0] == {"id": "o1", "with": {"top_k": 5}}
    assert doc["stages"][1]["id"] == "second" and doc["stages"][1]["enabled"] is False
    assert doc["stages"][1]["parallel"] == [[{"use": "t_overlap", "id": "o3", "enabled": True, "with": {"top_k": 1}}]]
    (tmp_path / "t_mine.yaml").write_text(text, encoding="utf-8")
    mine = load_route("t_mine", registry)
    assert [(s.spec.key, s.spec.enabled, s.spec.with_) for s in mine.stages()] == \
        [(s.spec.key, s.spec.enabled, s.spec.with_) for s in current.stages()]
    assert [e.spec.enabled for e in mine.entries if hasattr(e, "branches")] == [True, False]
    back = import_config(text, registry, find_route).config
    assert (back.set_, back.disable, back.enable) == (["o1.top_k=5", "o3.top_k=1"], ["second"], [])
