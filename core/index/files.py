"""Finding the files an index run reads: folders walked, ``.graphrouteignore`` honoured."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

IGNORE_FILE = ".graphrouteignore"


def fingerprint(data: Any) -> str:
    import hashlib
    import json

    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class IgnoreRule:
    """One line of a ``.graphrouteignore``, read as git reads a ``.gitignore`` line.

    A pattern without a ``/`` (a trailing one aside) matches a file or folder name at any depth
    below ``base``, the folder holding the ignore file; one with a ``/`` at the start or in the
    middle matches the path relative to ``base``. ``*`` and ``?`` never match a ``/``, ``**``
    matches any number of folders; a trailing ``/`` matches folders only (and so everything
    in them); a leading ``!`` takes back what an earlier line ignored."""

    base: Path
    parts: tuple[str, ...]  # the pattern's names, split at "/"
    anchored: bool
    dir_only: bool
    negate: bool

    @classmethod
    def parse(cls, base: Path, line: str) -> IgnoreRule | None:
        """The rule a line states; None for a blank line or a ``#`` comment."""
        pattern = line.strip()
        if pattern.startswith("#"):
            return None
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!")
        parts = tuple(x for x in pattern.split("/") if x)
        if not parts:
            return None
        return cls(base, parts, "/" in pattern.rstrip("/"), pattern.endswith("/"), negate)

    def matches(self, path: Path, is_dir: bool) -> bool:
        if (self.dir_only and not is_dir) or not path.is_relative_to(self.base):
            return False
        rel = path.relative_to(self.base).parts
        if not self.anchored:
            return bool(rel) and fnmatchcase(rel[-1], self.parts[0])
        return _match_parts(self.parts, rel)


def _match_parts(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether a path's names match a pattern's, one by one; ``**`` matches any run of them."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_match_parts(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _match_parts(pattern[1:], parts[1:])


def ignored(path: Path, is_dir: bool, rules: list[IgnoreRule]) -> bool:
    """Whether ``path`` is ignored: the last rule that matches it decides, so a ``!`` line
    takes back an earlier one and a deeper ignore file's lines (which come later) win."""
    verdict = False
    for rule in rules:
        if rule.matches(path, is_dir):
            verdict = not rule.negate
    return verdict


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


def _walk(top: Path, failed: list[dict[str, str]]) -> list[Path]:
    """The files below ``top`` in sorted order, hidden and ignored ones left out. A folder that
    cannot be listed is added to ``failed``, and so is one whose ignore file cannot be read:
    nothing below it is read, since that file may exclude any of it."""

    def unreadable(exc: OSError) -> None:  # os.walk's report of a folder it cannot list
        failed.append({"path": str(exc.filename), "reason": cannot_read("folder", exc)})

    files: list[Path] = []
    rules: list[IgnoreRule] = []
    for dirpath, dirnames, filenames in os.walk(top, onerror=unreadable):
        d = Path(dirpath)
        ig = d / IGNORE_FILE
        if ig.is_file():
            try:
                lines = ig.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                failed.append({"path": str(ig), "reason": f"{cannot_read('file', exc)}; its folder was not read"})
                dirnames[:] = []
                continue
            rules.extend(r for r in (IgnoreRule.parse(d, ln) for ln in lines) if r is not None)
        dirnames[:] = [n for n in sorted(dirnames) if not n.startswith(".") and not ignored(d / n, True, rules)]
        files.extend(
            d / n for n in sorted(filenames) if not n.startswith(".") and not ignored(d / n, False, rules)
        )
    return files


def collect_files(
    paths: list[Path], roots: list[Path] | None = None
) -> tuple[list[Path], list[dict[str, str]]]:
    """Files to index, folders walked recursively in sorted order.

    Hidden files and folders are skipped, and a folder may hold a ``.graphrouteignore`` of
    ``.gitignore`` lines (:class:`IgnoreRule`) for what is not documents, e.g. the sample
    corpus's ``questions.txt``; a file named in ``paths`` is read whatever they say. A folder
    that cannot be read is reported in the failed list, as an unreadable file is (the loader
    reports that one). Links to folders are not followed; a link loop is reported in the
    failed list and skipped. With ``roots``, a file whose real path (links followed) is
    outside every root is reported and skipped, so a link inside an allowed folder cannot
    reach a file elsewhere.
    """
    files: list[Path] = []
    failed: list[dict[str, str]] = []
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
        files.extend(_walk(p, failed))
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
