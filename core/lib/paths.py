"""Where graphroute keeps files shared by every store on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """Embedding / LLM caches shared by every store on this machine."""
    base = os.environ.get("GRAPHROUTE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "graphroute"
    )
    return Path(base)
