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


SYMLINK_LOOP = "symbolic link loop (following the link leads back to it); skipped"
OUTSIDE_ROOTS = "resolves to a file outside the allowed folders (--index-root); skipped"


def real_path(path: Path) -> Path | None:
    """Where ``path`` really is, links followed; None for a symbolic link loop."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # a dangling link: the loader reports the missing file
        return Path(os.path.realpath(path))
    except OSError:  # ELOOP
        return None


def collect_files(
    paths: list[Path], roots: list[Path] | None = None
) -> tuple[list[Path], list[dict[str, str]]]:
    """Files to index, folders walked recursively in sorted order.

    Hidden files and folders are skipped, and a folder may hold a ``.graphrouteignore`` with
    glob patterns (one per line, relative to that folder) for files that are not documents,
    e.g. the sample corpus's ``questions.txt``. Links to folders are not followed; a link
    loop is reported in the failed list and skipped. With ``roots``, a file whose real path
    (links followed) is outside every root is reported and skipped, so a link inside an
    allowed folder cannot reach a file elsewhere.
    """
    files: list[Path] = []
    failed: list[dict[str, str]] = []
    for p in paths:
        if p.is_symlink() and real_path(p) is None:
            failed.append({"path": str(p), "reason": SYMLINK_LOOP})
            continue
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
    real_roots = [Path(os.path.realpath(r)) for r in roots] if roots is not None else None
    for f in files:
        r = real_path(f)
        if r is None:
            failed.append({"path": str(f), "reason": SYMLINK_LOOP})
            continue
        if real_roots is not None and not any(r.is_relative_to(root) for root in real_roots):
            failed.append({"path": str(f), "reason": OUTSIDE_ROOTS})
            continue
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique, failed
