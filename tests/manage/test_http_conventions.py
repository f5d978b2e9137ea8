"""`graphroute serve` conventions on the real server (a uvicorn process, `--port 0`): one human
line naming its URL, `/docs` and `/redoc` that work with no network (their assets served by
the server itself, rendered in headless Chromium with every other host blocked; the pages
and the schema need the token, their library files do not), and one error body shape for
404, 405 and 422."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.playground.conftest import browser  # noqa: F401  (the Chromium fixture)
from tests.playground.test_browser import shot
from tests.server.live import STARTED, live_server

TOKEN = "conventions-token-0123456789"
GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")
ERROR_KEYS = {"error", "message", "request_id"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    d = tmp_path_factory.mktemp("serve")
    env = {**os.environ, "GRAPHROUTE_TOKEN": TOKEN, "GRAPHROUTE_CACHE": str(d / "cache")}
    args = [GRAPHROUTE, "serve", "--store", str(d / "store"), "--group", "g", "--port", "0", "--no-preload"]
    log = d / "server.log"
    with live_server(args, 0, env, log, d) as base:
        yield base, log.with_suffix(".out")


def test_one_human_line_with_the_url(server: tuple[str, Path]) -> None:
    base, out = server
    lines = out.read_text().splitlines()
    assert len(lines) == 1 and STARTED.match(lines[0]), lines
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base) and not base.endswith(":0")
    assert f"{base}/docs" in lines[0]


def test_docs_pages_load_their_assets_from_the_server(server: tuple[str, Path]) -> None:
    base, _ = server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for page, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")), ("/redoc", ("redoc.standalone.js",))):
        assert httpx.get(f"{base}{page}", timeout=30).status_code == 401
        html = httpx.get(f"{base}{page}", headers=auth, timeout=30).text
        external = [u for u in re.findall(r"""(?:src|href)=["']([^"']+)""", html) if u.startswith(("http:", "https:", "//"))]
        assert not external, (page, external)
        for name in assets:
            url = re.search(rf"""["']([^"']*/{re.escape(name)})["']""", html)
            assert url, (page, name)
            r = httpx.get(f"{base}{url.group(1)}", timeout=30)
            assert r.status_code == 200 and len(r.content) > 10_000, (page, name)
    assert "cdn.jsdelivr" not in httpx.get(f"{base}/docs", headers=auth, timeout=30).text
    assert httpx.get(f"{base}/openapi.json", timeout=30).status_code == 401


def test_errors_have_one_shape(server: tuple[str, Path]) -> None:
    base, _ = server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    cases = [
        ("GET", "/no/such/endpoint", None, 404, "not_found"),
        ("DELETE", "/query", None, 405, "method_not_allowed"),
        ("POST", "/query", {"question": "q", "colour": "red"}, 422, "invalid_request"),
        ("POST", "/query", {}, 422, "invalid_request"),
        ("POST", "/query", {"question": "q"}, 401, "unauthorized"),
    ]
    for method, path, body, status, code in cases:
        headers = {} if status == 401 else auth
        r = httpx.request(method, f"{base}{path}", json=body, headers={**headers, "X-Request-ID": "shape-1"}, timeout=60)
        assert r.status_code == status, (method, path, r.text)
        data = r.json()
        assert set(data) == ERROR_KEYS and data["error"] == code and data["request_id"] == "shape-1", data
        assert data["message"], data
    r = httpx.post(f"{base}/query", json={"question": "q", "colour": "red"}, headers=auth, timeout=60)
    assert "colour" in r.json()["message"] and "red" not in r.json()["message"]  # names the field, not the input
    assert "POST" in httpx.delete(f"{base}/query", headers=auth).headers.get("allow", "")
    # a body that is not JSON is a bad request, said where it breaks, without the body
    broken = b'{"question":\n  "Who approves travel, "route": }'
    r = httpx.post(f"{base}/query", content=broken, headers={**auth, "content-type": "application/json"}, timeout=60)
    assert r.status_code == 400 and set(r.json()) == ERROR_KEYS and r.json()["error"] == "bad_json", r.text
    assert r.json()["message"].startswith("the body is not valid JSON: ") and "at line 2, column " in r.json()["message"]
    assert "approves" not in r.json()["message"]


def test_docs_render_offline_in_chromium(server: tuple[str, Path], browser: Any) -> None:  # noqa: F811
    base, _ = server
    page = browser.new_page()
    page.set_viewport_size({"width": 1280, "height": 800})
    page.set_extra_http_headers({"Authorization": f"Bearer {TOKEN}"})  # as a proxy that adds the token would
    outside: list[tuple[str, str]] = []

    def only_the_server(route: Any) -> None:
        if route.request.url.startswith(base):
            route.continue_()
        else:  # no network: any other host is refused
            outside.append((route.request.resource_type, route.request.url))
            route.abort()

    page.route("**/*", only_the_server)
    try:
        page.goto(f"{base}/docs")
        page.wait_for_selector(".swagger-ui .opblock-summary-path", timeout=60_000)
        assert "graphroute" in page.inner_text(".swagger-ui .info .title")
        assert "/query" in page.inner_text(".swagger-ui")
        shot(page, "http-api-docs.png")
        page.goto(f"{base}/redoc")
        page.wait_for_selector("[role=menuitem], .menu-content", timeout=60_000)
        assert "query" in page.inner_text("body").lower()
        # nothing the pages need comes from elsewhere; ReDoc's "API docs by Redocly" footer asks
        # for its logo picture, which is left out with no effect on the page
        assert all(kind == "image" for kind, _ in outside), outside
    finally:
        page.close()
