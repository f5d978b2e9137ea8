"""`graphroute serve` as a real uvicorn process on a loopback port, for end-to-end tests."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


@contextlib.contextmanager
def live_server(args: list[str], port: int, env: dict[str, str], log: Path, cwd: Path) -> Iterator[str]:
    """Start the server, wait until /health answers, yield its base URL, stop it."""
    with log.open("w") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"server exited with {proc.returncode}: {log.read_text()}")
                try:
                    if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"server did not come up: {log.read_text()}")
                time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
