"""The playground in a real headless Chromium: load it (token first), pick a route, switch a
stage and edit a parameter by keyboard, ask, run A/B, copy YAML and a command and load the
YAML back, score a question set, and lay out at desktop and phone width.

What the page shows is checked against the API's own answers for the same configuration.
``GRAPHROUTE_SCREENSHOTS=DIR`` saves the pictures the docs use (docs/pages/img/).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.playground.conftest import GROUP, TOKEN, Served
from tests.playground.test_api import QUESTION, SET, cfg

pytestmark = pytest.mark.timeout(180)
SHOTS = os.environ.get("GRAPHROUTE_SCREENSHOTS")


def shot(target: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(Path(SHOTS) / name))


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    """A fresh tab on the playground; every request it makes is recorded."""
    browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=served.base)
    p = browser.new_page()
    p.set_viewport_size({"width": 1280, "height": 800})
    requests: list[str] = []
    errors: list[str] = []
    p.on("request", lambda r: requests.append(r.url))
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    p.close()
    assert not errors, errors  # no script error on any page
    assert requests and all(u.startswith(served.base + "/") or u.startswith("data:") for u in requests), requests


def open_with_token(page: Any, served: Served, route: str = "route2_reference") -> None:
    page.goto(served.base + "/")
    page.evaluate(f"sessionStorage.setItem('graphroute-playground-token', {json.dumps(TOKEN)})")
    page.reload()
    expect(page.locator("#route")).to_have_value("route1_vector")
    page.select_option("#route", route)
    with served.client() as client:  # the page shows the route's own description
        shown = next(r["description"] for r in client.get("/routes").json() if r["name"] == route)
    expect(page.locator("#route-desc")).to_contain_text(shown.split(":")[0])
    expect(page.locator("#stages li.stage").first).to_be_visible()


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


def api(served: Served, method: str, path: str, body: Any = None) -> Any:
    with served.client() as c:
        r = c.request(method, path, json=body)
        assert r.status_code == 200, r.text
        return r.json()


def stage(page: Any, sid: str) -> Any:
    return page.locator(f"#stages li.stage[data-stage='{sid}']")


# --------------------------------------------------------------------------- tests


def test_load_token_pick_route(page: Any, served: Served) -> None:
    page.goto(served.base + "/")
    expect(page.locator("#token-form")).to_be_visible()  # the API answered 401
    expect(page.locator("#status")).to_contain_text("needs a bearer token")
    page.fill("#token", TOKEN)
    page.press("#token", "Enter")
    expect(page.locator("#token-form")).to_be_hidden()
    expect(page.locator("#group")).to_have_value(GROUP)
    expect(page.locator("#route")).to_have_value("route1_vector")  # the server's default route
    page.select_option("#route", "route2_reference")
    view = api(served, "GET", "/playground/routes/route2_reference")
    expect(page.locator("#stages li.stage")).to_have_count(len(view["stages"]))
    ids = page.locator("#stages li.stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert ids == [s["id"] for s in view["stages"]]
    expect(stage(page, "vector_fallback").get_by_role("switch")).not_to_be_checked()
    expect(stage(page, "score_gap").get_by_role("switch")).to_be_checked()


def test_switch_edit_ask_by_keyboard(page: Any, served: Served) -> None:
    open_with_token(page, served)
    # switch a stage off with the keyboard
    switch = stage(page, "md5_dedup").get_by_role("switch")
    switch.focus()
    page.keyboard.press("Space")
    expect(switch).not_to_be_checked()
    expect(stage(page, "md5_dedup")).to_have_class("stage off changed")
    # open a stage's parameters with Enter, type a bad value: the CLI's message, inline
    toggle = stage(page, "score_gap").locator(".stage-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    field = stage(page, "score_gap").locator("input[data-param='threshold']")
    field.fill("abc")
    wanted = api(served, "POST", "/playground/resolve",
                 {"config": cfg(set_=["score_gap.threshold=abc"], disable=["md5_dedup"])})["errors"][0]["message"]
    error = stage(page, "score_gap").locator(".param[data-param='threshold'] .param-error")
    expect(error).to_have_text(wanted)
    assert "bad value for `threshold` of stage `score_gap`" in wanted
    expect(field).to_have_attribute("aria-invalid", "true")
    field.fill("0.3")
    expect(error).to_have_text("")
    # ask: answer, citations, evidence, trace and graph are the API's for this configuration
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    card = page.locator(".run-card")
    expect(card).to_be_visible()
    run = api(served, "POST", "/playground/query", {"question": QUESTION, "group": GROUP,
                                                    "config": cfg(set_=["score_gap.threshold=0.3"], disable=["md5_dedup"])})
    expect(card.locator(".answer-text")).to_have_text(run["result"]["answer"])
    expect(card.locator(".citations li")).to_have_count(len(run["result"]["citations"]))
    expect(card.locator(".evidence-item")).to_have_count(len(run["result"]["evidence"]))
    expect(card.locator("tr.stage-trace")).to_have_count(len(run["result"]["trace"]))
    expect(card.locator("tr.stage-trace.off[data-stage='md5_dedup']")).to_have_count(1)
    expect(card.locator(".graph .node")).to_have_count(len(run["graph"]["nodes"]))
    assert card.locator(".graph .node.r-seed").count() and card.locator(".graph .node.r-passage").count()
    shot(page, "playground-desktop.png")
    node = card.locator(".graph .node").first
    node.focus()  # graph nodes are reachable by Tab; focusing one names it and lights its edges
    expect(card.locator(".graph-info")).to_contain_text(run["graph"]["nodes"][0]["name"])
    shot(card.locator(".graph"), "playground-graph.png")


def test_ab_side_by_side(page: Any, served: Served) -> None:
    open_with_token(page, served)
    page.check("#compare")
    page.click(".side[data-side='b']")
    expect(page.locator(".side[data-side='b']")).to_have_attribute("aria-pressed", "true")
    for sid in ("score_gap", "community_filter"):
        stage(page, sid).get_by_role("switch").uncheck()
        expect(stage(page, sid)).to_have_class("stage off changed differs")
    page.fill("#question", QUESTION)
    page.click("#run-ab")
    expect(page.locator(".ab-grid .run-card")).to_have_count(2)
    ab = api(served, "POST", "/playground/ab", {"question": QUESTION, "group": GROUP, "a": cfg(),
                                                "b": cfg(disable=["score_gap", "community_filter"])})
    entered = [e["id"] for e in ab["diff"]["entered"]]
    left = [e["id"] for e in ab["diff"]["left"]]
    assert entered or left
    b_card = page.locator(".run-card[data-side='b']")
    a_card = page.locator(".run-card[data-side='a']")
    assert b_card.locator(".evidence-item.entered").evaluate_all("els => els.map(e => e.dataset.id)") == entered
    assert a_card.locator(".evidence-item.left").evaluate_all("els => els.map(e => e.dataset.id)") == left
    expect(page.locator(".ab-summary")).to_contain_text(f"{len(entered)} entered, {len(left)} left")
    differing = [r["stage"] for r in ab["diff"]["stages"] if r["changes"]]
    assert "score_gap" in differing
    assert b_card.locator("tr.stage-trace.differs").evaluate_all("els => els.map(e => e.dataset.stage)") == differing
    expect(b_card.locator("tr.stage-trace[data-stage='ner_seeds']")).not_to_have_class("stage-trace differs")
    shot(page, "playground-ab.png")


def test_copy_yaml_and_command_then_load_the_yaml(page: Any, served: Served) -> None:
    open_with_token(page, served)
    stage(page, "community_filter").get_by_role("switch").uncheck()
    stage(page, "score_gap").locator(".stage-toggle").click()
    stage(page, "score_gap").locator("input[data-param='threshold']").fill("0.3")
    page.fill("#question", QUESTION)
    page.click("#copy-yaml")
    expect(page.locator("#export")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("Copied the route file")
    text = page.locator("#export-text").input_value()
    assert page.evaluate("navigator.clipboard.readText()") == text
    doc = yaml.safe_load(text)
    assert doc["extends"] == "route2_reference"
    assert doc["stages"] == [{"id": "community_filter", "enabled": False}, {"id": "score_gap", "with": {"threshold": 0.3}}]

    page.click("#copy-command")
    expect(page.locator("#export-label")).to_have_text("Command")
    expect(page.locator("#export-text")).to_have_value(re.compile("^graphroute query"))
    command = page.locator("#export-text").input_value()
    assert "--set score_gap.threshold=0.3" in command and "--disable community_filter" in command
    assert command.startswith(f"graphroute query '{QUESTION}' --group {GROUP} --route route2_reference")

    # reload it through the API, then into the page's other configuration
    loaded = api(served, "POST", "/playground/import", {"yaml": text})["config"]
    assert loaded == cfg(set_=["score_gap.threshold=0.3"], disable=["community_filter"])
    page.click("#reset")
    expect(stage(page, "community_filter").get_by_role("switch")).to_be_checked()
    page.click("#open-import")
    page.fill("#import-text", text)
    page.click("#import button[type='submit']")
    expect(page.locator("#status")).to_contain_text("Loaded route2_reference_custom")
    expect(stage(page, "community_filter").get_by_role("switch")).not_to_be_checked()
    expect(stage(page, "score_gap")).to_have_class("stage changed")
    assert stage(page, "score_gap").locator("input[data-param='threshold']").input_value() == "0.3"
    page.click("#ask")
    answer = api(served, "POST", "/query", {"question": QUESTION, "route": "route2_reference", "group": GROUP,
                                           "overrides": {"community_filter.enabled": False, "score_gap.threshold": 0.3}})
    expect(page.locator(".run-card .answer-text")).to_have_text(answer["answer"])


def test_question_set_scores_a_and_b(page: Any, served: Served) -> None:
    open_with_token(page, served)
    page.check("#compare")
    page.click(".side[data-side='b']")
    stage(page, "score_gap").get_by_role("switch").uncheck()
    page.locator("#question-set summary").click()
    page.fill("#qset-text", "\n".join(json.dumps(q) for q in SET))
    page.click("#qset-run")
    out = page.locator("#qset-out")
    expect(out.locator(".verdict")).to_be_visible()
    res = api(served, "POST", "/playground/ab/questions", {"group": GROUP, "a": cfg(), "b": cfg(disable=["score_gap"]),
                                                           "questions": SET})
    cmp = res["comparison"]
    expect(out.locator(".verdict")).to_contain_text(f"Verdict: {cmp['verdict']}")
    row = out.locator(".metrics tr", has=page.locator("th", has_text="recall@2"))
    cells = row.locator("td").all_inner_texts()
    expected = [cmp["a"]["metrics"]["recall@2"], cmp["b"]["metrics"]["recall@2"]]
    assert [float(c) for c in cells[:2]] == pytest.approx(expected)
    expect(out.locator(".per-question tbody tr")).to_have_count(len(SET))
    expect(out).to_contain_text("No such document")  # the unresolved gold reference
    shot(out, "playground-question-set.png")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_layout_fits_the_width(page: Any, served: Served, size: tuple[int, int]) -> None:
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    open_with_token(page, served)
    page.fill("#question", QUESTION)
    page.click("#ask")
    expect(page.locator(".run-card")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{overflow}px of horizontal scrolling at {width}px"
    for sel in ("#question", "#ask", "#route", "#stages", ".run-card"):
        box = page.locator(sel).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (sel, box)
    if width < 600:
        page.evaluate("window.scrollTo(0, 0)")
        shot(page, "playground-phone.png")
