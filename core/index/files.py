"""Finding the files an index run reads: folders walked, ``.graphrouteignore`` honoured."""

from __future__ import annotations

import errno
import os
import stat
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


def cannot_read(what: str, exc: OSError) -> str:
    """Why a file or folder is listed under ``failed``, in the loaders' words for a file."""
    return f"cannot read {what} ({exc.strerror or exc})"


def is_gone(path: Path) -> bool:
    """Whether ``path`` is no longer there (a link loop counts as gone). False when that cannot
    be told, e.g. a folder above it cannot be searched: a document is never removed because
    its folder became unreadable."""
    try:
        path.stat()
    except OSError as exc:
        return exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
    return False


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
    e.g. the sample corpus's ``questions.txt``. A folder that cannot be read is reported in
    the failed list, as an unreadable file is (the loader reports that one). Links to folders
    are not followed; a link loop is reported in the failed list and skipped. With ``roots``,
    a file whose real path (links followed) is outside every root is reported and skipped, so
    a link inside an allowed folder cannot reach a file elsewhere.
    """
    files: list[Path] = []
    failed: list[dict[str, str]] = []

    def unreadable(exc: OSError) -> None:  # os.walk's report of a folder it cannot list
        failed.append({"path": str(exc.filename), "reason": cannot_read("folder", exc)})

    for p in paths:
        try:
            mode = p.stat().st_mode
        except FileNotFoundError:  # a dangling link's target too
            failed.append({"path": str(p), "reason": "no such file or directory"})
            continue
        except OSError as exc:  # a link loop, or a folder above it that cannot be searched
            failed.append({"path": str(p), "reason": SYMLINK_LOOP if exc.errno == errno.ELOOP else cannot_read("path", exc)})
            continue
        if stat.S_ISREG(mode):
            files.append(p)
            continue
        if not stat.S_ISDIR(mode):
            failed.append({"path": str(p), "reason": "not a regular file or a folder"})
            continue
        ignore: list[tuple[Path, list[str]]] = []
        for dirpath, dirnames, filenames in os.walk(p, onerror=unreadable):
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
