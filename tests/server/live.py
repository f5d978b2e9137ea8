"""`graphroute serve` as a real uvicorn process on a loopback port, for end-to-end tests."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

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
