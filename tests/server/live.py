"""Real servers on a loopback port for end-to-end tests: `graphroute serve` as a process, or
an app from :func:`create_app` served by uvicorn in a thread of the test process."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

STARTED = re.compile(r"^graphroute serving group \S+ at (http://\S+)/ \(API docs at ")


@contextlib.contextmanager
def live_server(args: list[str], port: int, env: dict[str, str], log: Path, cwd: Path) -> Iterator[str]:
    """Start the server, wait until /health answers, yield its base URL, stop it.

    stderr (the JSON log) goes to ``log``, stdout (the one human line naming the URL) to
    ``log`` with the suffix ``.out``; with ``port`` 0 the URL is read from that line."""
    out = log.with_suffix(".out")
    with log.open("w") as fh, out.open("w") as out_fh:
        proc = subprocess.Popen(args, stdout=out_fh, stderr=fh, env=env, cwd=cwd)
        base = f"http://127.0.0.1:{port}" if port else ""
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"server exited with {proc.returncode}: {out.read_text()}{log.read_text()}")
                if not base and (m := STARTED.match(out.read_text())):
                    base = m.group(1)
                try:
                    if base and httpx.get(f"{base}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"server did not come up: {out.read_text()}{log.read_text()}")
                time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port, in a thread of this process (so
    it can use the test stages registered here); yield its base URL, stop it."""
    import threading

    import uvicorn
    from graphroute.core.apps.serve.commands import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def finished(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    """Post an index job and poll it until it ends (600 s at most); the job's last state."""
    r = client.post("/index", json=body)
    assert r.status_code == 202, r.text
    job: dict[str, Any] = r.json()
    deadline = time.monotonic() + 600
    while job["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = client.get(f"/jobs/{job['id']}").json()
    return job
