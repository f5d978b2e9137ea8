"""Shared helpers for the reliability suite: the real CLI as a subprocess, the real stores.

Every CLI run here is the installed ``graphroute`` console script in a fresh process, so what
is tested is what a user sees: the exit code, stderr, and whether a traceback leaked. Models
are the real offline ones; the embedding cache lives in a per-session folder so repeated
runs of the same text stay cheap without touching the user's cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from graphroute.core.config.settings import Settings

REPO = Path(__file__).resolve().parents[2]
GRAPHROUTE = str(Path(sys.executable).with_name("graphroute"))
PAUSE_PLUGIN = "tests.reliability.pause_plugin"


def cli_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHROUTE")}
    env.update({
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
        "GRAPHROUTE_PROGRESS": "0", "GRAPHROUTE_CACHE": str(cache), "COLUMNS": "200",
        "PYTHONPATH": str(REPO),
    })
    env.update(extra)
    return env


def run_cli(*args: str, cache: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
    """``graphroute ARGS`` in a subprocess; stdout and stderr captured as text."""
    return subprocess.run(
        [GRAPHROUTE, *args], capture_output=True, text=True, env=cli_env(cache, **env), timeout=timeout, cwd=REPO,
    )


def when_paused(
    args: list[str],
    marker: Path,
    cache: Path,
    act: Callable[[subprocess.Popen[str]], None],
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``graphroute ARGS`` with the pause plugin (``pause_plugin.py``); once it pauses
    (it writes ``marker``), ``act`` on the process, then let it run to its end."""
    env = cli_env(cache, GRAPHROUTE_PLUGINS=PAUSE_PLUGIN, GRAPHROUTE_TEST_PAUSE=str(marker))
    proc = subprocess.Popen([GRAPHROUTE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                            preexec_fn=preexec_fn)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached its pause"
            time.sleep(0.05)
        act(proc)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_no_traceback(r: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Embedding/LLM cache shared by the suite's CLI runs and in-process indexers."""
    return tmp_path_factory.mktemp("graphroute-cache")


@pytest.fixture
def settings(cache_dir: Path) -> Settings:
    s = Settings()
    s.cache_dir = cache_dir
    return s


@pytest.fixture(autouse=True)
def _no_graphroute_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Environment overrides from the developer's shell must not change a route under test."""
    for key in list(os.environ):
        if key.startswith("GRAPHROUTE__") or key in ("GRAPHROUTE_ROUTES", "GRAPHROUTE_LLM"):
            monkeypatch.delenv(key)
    yield
