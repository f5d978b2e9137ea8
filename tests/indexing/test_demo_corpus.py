"""`make demo` installs only ``DEMO_EXTRAS``: the sample corpus it indexes must load with them.

A loader asks :func:`graphroute.plugins.loaders.files.require` for its optional dependency and
names the extra that installs it; a sample document whose extra the demo does not install is
reported as failed and the demo answers its question "not found".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.apps.cli.commands import SAMPLE_CORPUS
from graphroute.core.index.files import collect_files
from graphroute.core.registry import build_registry
from graphroute.plugins.loaders import files

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def demo_extras() -> set[str]:
    found = re.search(r"^DEMO_EXTRAS \?= *(\S+)", MAKEFILE.read_text(encoding="utf-8"), re.M)
    assert found, "Makefile sets no DEMO_EXTRAS"
    return set(found.group(1).split(","))


def test_make_demo_installs_every_extra_its_sample_corpus_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []
    real = files.require

    def spy(path: Path, module: str, package: str, extra: str) -> Any:
        asked.append((path.name, extra))
        return real(path, module, package, extra)

    registry = build_registry(entry_points=False)
    classes = [e.cls for e in registry.loaders.entries.values()]
    for module in {sys.modules[cls.__module__] for cls in classes}:  # each loader's own name for require
        if hasattr(module, "require"):
            monkeypatch.setattr(module, "require", spy)
    loaders = [cls(cls.Params()) for cls in classes if cls.by_default]
    documents, failed = collect_files([SAMPLE_CORPUS])  # the files the demo's index run reads
    assert not failed
    assert {p.suffix for p in documents} >= {".md", ".html", ".txt"}
    for path in documents:
        loader = next(x for x in loaders if x.accepts(path))
        assert list(loader.load(path)), path
    assert ("invoice_hv_2024_017.html", "html") in asked  # the spy sees the loaders' requests
    missing = sorted({(name, extra) for name, extra in asked if extra not in demo_extras()})
    assert not missing, f"make demo installs {sorted(demo_extras())}; the sample corpus also needs {missing}"
