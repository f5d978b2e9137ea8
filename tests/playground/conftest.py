"""Fixtures for the playground: the sample corpus indexed with the default profile (real
store, spaCy and MiniLM), served by the real app over a loopback port with a token, and a
real headless Chromium (Debian's `chromium`, driven by Playwright; `make test` installs it).

Without Chromium the browser tests skip, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.playground import mount_playground
from graphroute.core.apps.serve.server import ServerConfig, create_app
from graphroute.core.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = ROOT / "examples" / "sample_corpus"
TOKEN = "playground-test-token"
GROUP = "sample"
CHROMIUM = os.environ.get("GRAPHROUTE_CHROMIUM", "/usr/bin/chromium")
# the flags that work on a CI machine with no display, no GPU and no network
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@dataclass
class Served:
    base: str
    engine: GraphRoute

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The sample corpus behind the real app (uvicorn on a loopback port, in this process so
    the models the indexer loaded serve the queries too)."""
    import uvicorn

    d = tmp_path_factory.mktemp("playground")
    settings = Settings()
    settings.store = str(d / "store")
    settings.group = GROUP
    settings.cache_dir = d / "cache"
    gr = GraphRoute(settings=settings)
    report = gr.index([SAMPLE_CORPUS])
    assert report.to_json()["indexed"] == 3, report.to_json()
    # the default route is not the one the tests pick, so picking a route is exercised
    app = create_app(ServerConfig(token=TOKEN, default_route="route1_vector", request_timeout_s=120.0), gr)
    mount_playground(app)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, name="playground-uvicorn", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.05)
    try:
        yield Served(base, gr)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        gr.close()


def chromium_or_skip() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    found = shutil.which("chromium")
    if found:
        return found
    message = f"Chromium not found at {CHROMIUM}: `apt-get install -y chromium` (make test does it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, with a fresh profile directory; never a downloaded build.

    Module-scoped: Playwright's sync API keeps an event loop running on the main thread while
    it is open, and the tests after these run routes on that thread."""
    executable = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    profile = tempfile.mkdtemp(prefix="graphroute-chromium-")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
