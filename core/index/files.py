"""Finding the files an index run reads: folders walked, ``.graphrouteignore`` honoured."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

IGNORE_FILE = ".graphrouteignore"


def fingerprint(data: Any) -> str:
    import hashlib
    import json

    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _ignored(path: Path, patterns: list[str], root: Path) -> bool:
    import fnmatch

    rel = path.relative_to(root).as_posix()
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def collect_files(paths: list[Path]) -> tuple[list[Path], list[dict[str, str]]]:
    """Files to index, folders walked recursively in sorted order.

    Hidden files and folders are skipped, and a folder may hold a ``.graphrouteignore`` with
    glob patterns (one per line, relative to that folder) for files that are not documents,
    e.g. the sample corpus's ``questions.txt``.
    """
    files: list[Path] = []
    failed: list[dict[str, str]] = []
    for p in paths:
        if p.is_file():
            files.append(p)
            continue
        if not p.exists():
            failed.append({"path": str(p), "reason": "no such file or directory"})
            continue
        ignore: list[tuple[Path, list[str]]] = []
        for dirpath, dirnames, filenames in os.walk(p):
            d = Path(dirpath)
            dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
            ig = d / IGNORE_FILE
            if ig.is_file():
                pats = [ln.strip() for ln in ig.read_text(encoding="utf-8", errors="replace").splitlines()]
                ignore.append((d, [x for x in pats if x and not x.startswith("#")]))
            for name in sorted(filenames):
                f = d / name
                if name.startswith("."):
                    continue
                if any(f.is_relative_to(root) and _ignored(f, pats, root) for root, pats in ignore):
                    continue
                files.append(f)
    seen: set[Path] = set()
    unique = []
    for f in files:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique, failed
