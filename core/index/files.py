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


class IgnoreFile:
    """The lines of one ``.graphrouteignore``, read as git reads a ``.gitignore`` (pathspec's
    ``GitIgnoreSpec``: names at any depth, ``dir/`` for folders, a ``/`` anchoring a pattern to
    the file's folder, ``**``, ``!`` taking a match back), for the paths below its folder."""

    def __init__(self, base: Path, lines: list[str]) -> None:
        from pathspec import GitIgnoreSpec

        self.base = base
        self.spec = GitIgnoreSpec.from_lines(lines)

    def verdict(self, path: Path, is_dir: bool) -> bool | None:
        """True (ignored), False (taken back by a ``!`` line) or None (no line matches)."""
        if not path.is_relative_to(self.base):
            return None
        rel = path.relative_to(self.base).as_posix() + ("/" if is_dir else "")
        return self.spec.check_file(rel).include


def ignored(path: Path, is_dir: bool, files: list[IgnoreFile]) -> bool:
    """Whether ``path`` is ignored: the deepest ignore file with a line about it decides (a
    folder's own file over its parents'), as with nested ``.gitignore`` files."""
    for ignore in reversed(files):
        verdict = ignore.verdict(path, is_dir)
        if verdict is not None:
            return verdict
    return False


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


FOLDER_LINK = "a link to a folder: links to folders are not followed (index the folder it points to by its own path)"


def _walk(top: Path, failed: list[dict[str, str]], skipped: list[dict[str, str]] | None = None) -> list[Path]:
    """The files below ``top`` in sorted order, hidden and ignored ones left out. A folder that
    cannot be listed is added to ``failed``, and so is one whose ignore file cannot be read:
    nothing below it is read, since that file may exclude any of it. A link to a folder is
    not followed; with ``skipped``, it is listed there."""

    def unreadable(exc: OSError) -> None:  # os.walk's report of a folder it cannot list
        failed.append({"path": str(exc.filename), "reason": cannot_read("folder", exc)})

    files: list[Path] = []
    rules: list[IgnoreFile] = []
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
            rules.append(IgnoreFile(d, lines))
        dirnames[:] = [n for n in sorted(dirnames) if not n.startswith(".") and not ignored(d / n, True, rules)]
        if skipped is not None:
            skipped.extend({"path": str(d / n), "reason": FOLDER_LINK} for n in dirnames if (d / n).is_symlink())
        files.extend(
            d / n for n in sorted(filenames) if not n.startswith(".") and not ignored(d / n, False, rules)
        )
    return files


def collect_files(
    paths: list[Path], roots: list[Path] | None = None, skipped: list[dict[str, str]] | None = None
) -> tuple[list[Path], list[dict[str, str]]]:
    """Files to index, folders walked recursively in sorted order.

    Hidden files and folders are skipped, and a folder may hold a ``.graphrouteignore`` of
    ``.gitignore`` lines (:class:`IgnoreFile`) for what is not documents, e.g. the sample
    corpus's ``questions.txt``; a file named in ``paths`` is read whatever they say. A folder
    that cannot be read is reported in the failed list, as an unreadable file is (the loader
    reports that one). Links to folders are not followed; a link loop is reported in the
    failed list and skipped. With ``roots``, a file whose real path (links followed) is
    outside every root is reported and skipped, so a link inside an allowed folder cannot
    reach a file elsewhere. With ``skipped``, the links to folders met while walking are
    listed there.
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
        files.extend(_walk(p, failed, skipped))
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
