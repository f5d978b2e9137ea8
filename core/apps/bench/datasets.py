"""Benchmark datasets: a question bank and the corpus it is answered from.

Two question formats are read (see docs/benchmarking.md):

* **HippoRAG JSON** (``musique/questions.json``): a list of ``{id, question, answer,
  answer_aliases, paragraphs: [{title, paragraph_text, is_supporting}], answerable}``; the
  gold passages are the ``is_supporting`` paragraphs.
* **JSONL**, one question per line: ``{"id", "question", "answer", "aliases",
  "gold": [{"title", "text"} | "title"], "answerable", "type", "hops"}``; every key but
  ``question`` is optional (``type`` and ``hops`` are kept as question metadata).

Corpora are a JSON list (or JSONL) of ``{"title", "text"}``. Each corpus entry is one
passage; a question's gold references are resolved to corpus entries by title AND text
(titles repeat in MuSiQue), or by title alone when a JSONL reference gives no text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphroute.core.errors import DatasetError


@dataclass(frozen=True)
class Passage:
    title: str
    text: str


@dataclass
class Question:
    id: str
    question: str
    answers: list[str]  # the answer first, then its aliases
    gold: list[int] = field(default_factory=list)  # indexes into the corpus
    answerable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dataset:
    """Questions with gold passages resolved against one corpus."""

    name: str
    questions: list[Question]
    corpus: list[Passage]
    corpus_hash: str
    unresolved_gold: int = 0  # gold references that matched no corpus entry
    unresolved_refs: list[str] = field(default_factory=list)  # which: "title" (question id), in file order

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "questions": len(self.questions),
            "passages": len(self.corpus),
            "corpus_hash": self.corpus_hash,
            "answerable": sum(q.answerable for q in self.questions),
            "unanswerable": sum(not q.answerable for q in self.questions),
            "gold_passages": sum(len(q.gold) for q in self.questions),
            "unresolved_gold": self.unresolved_gold,
        }


# --------------------------------------------------------------------------- corpus


def _read_records(path: Path) -> list[Any]:
    """A JSON list, or JSON Lines (one object a line, blank lines skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON list")
        return data
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: invalid JSON line: {exc.msg}") from None
    return records


def load_corpus(path: str | Path) -> list[Passage]:
    """Read ``[{title, text}]`` (JSON or JSONL)."""
    p = Path(path)
    out: list[Passage] = []
    for i, rec in enumerate(_read_records(p)):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            raise DatasetError(f"{p}: entry {i} needs a string `text` (and a `title`)")
        out.append(Passage(title=str(rec.get("title") or ""), text=rec["text"]))
    if not out:
        raise DatasetError(f"{p}: the corpus is empty")
    return out


def corpus_hash(corpus: list[Passage]) -> str:
    """Content hash of the corpus (order included): names the bench group and keys its cache."""
    h = hashlib.sha256()
    for p in corpus:
        h.update(json.dumps([p.title, p.text], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def corpus_records(corpus: list[Passage]) -> list[dict[str, str]]:
    return [{"title": p.title, "text": p.text} for p in corpus]


# --------------------------------------------------------------------------- questions


class _GoldIndex:
    """Resolves gold references to corpus indexes by (title, text), or title alone."""

    def __init__(self, corpus: list[Passage]) -> None:
        self.by_pair: dict[tuple[str, str], int] = {}
        self.by_title: dict[str, list[int]] = {}
        for i, p in enumerate(corpus):
            self.by_pair.setdefault((p.title, p.text.strip()), i)
            self.by_title.setdefault(p.title, []).append(i)

    def resolve(self, title: str, text: str | None) -> list[int]:
        if text is not None:
            i = self.by_pair.get((title, text.strip()))
            return [] if i is None else [i]
        return list(self.by_title.get(title, []))


def _as_str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v is not None and str(v) != ""]


def _answers(answer: Any, aliases: Any) -> list[str]:
    out: list[str] = []
    for a in [*_as_str_list(answer), *_as_str_list(aliases)]:
        if a not in out:
            out.append(a)
    return out


def _flag(rec: dict[str, Any], i: int, default: bool) -> bool:
    """The record's ``answerable``: true or false, not a string ("false" would read as true)."""
    value = rec.get("answerable", default)
    if not isinstance(value, bool):
        raise DatasetError(f"question {i}: `answerable` must be true or false (got {value!r})")
    return value


def _parse_hipporag(rec: dict[str, Any], i: int, index: _GoldIndex) -> tuple[Question, list[str]]:
    missing: list[str] = []
    gold: list[int] = []
    for para in rec.get("paragraphs") or []:
        if not para.get("is_supporting"):
            continue
        title = str(para.get("title") or "")
        hits = index.resolve(title, str(para.get("paragraph_text") or ""))
        if not hits:
            missing.append(title)
        gold.extend(h for h in hits if h not in gold)
    q = Question(
        id=str(rec.get("id") or f"q{i}"),
        question=str(rec["question"]),
        answers=_answers(rec.get("answer"), rec.get("answer_aliases")),
        gold=gold,
        answerable=_flag(rec, i, True),
        metadata={"hops": len(rec.get("question_decomposition") or []) or None},
    )
    return q, missing


def _parse_simple(rec: dict[str, Any], i: int, index: _GoldIndex) -> tuple[Question, list[str]]:
    missing: list[str] = []
    gold: list[int] = []
    refs = rec.get("gold") or []
    if isinstance(refs, str | dict):  # one reference without its list: not its characters or keys
        refs = [refs]
    if not isinstance(refs, list):
        raise DatasetError(f"question {i}: `gold` must be a list of titles or {{title, text}} (got {refs!r})")
    for ref in refs:
        if isinstance(ref, str):
            hits = index.resolve(ref, None)
        elif isinstance(ref, dict):
            hits = index.resolve(str(ref.get("title") or ""), ref.get("text"))
        else:
            raise DatasetError(f"question {i}: a `gold` entry must be a title or {{title, text}}")
        if not hits:
            missing.append(ref if isinstance(ref, str) else str(ref.get("title") or ""))
        gold.extend(h for h in hits if h not in gold)
    answers = _answers(rec.get("answer"), rec.get("aliases", rec.get("answer_aliases")))
    answerable = _flag(rec, i, bool(answers))
    q = Question(
        id=str(rec.get("id") or f"q{i}"),
        question=str(rec["question"]),
        answers=answers,
        gold=gold,
        answerable=answerable,
        metadata={k: rec[k] for k in ("type", "hops") if k in rec},
    )
    return q, missing


def load_dataset(questions: str | Path, corpus: str | Path, *, limit: int | None = None) -> Dataset:
    """Read a question file and its corpus; resolve gold passages to corpus indexes."""
    passages = load_corpus(corpus)
    index = _GoldIndex(passages)
    qpath = Path(questions)
    records = _read_records(qpath)
    out: list[Question] = []
    unresolved: list[str] = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("question"), str) or not rec["question"].strip():
            raise DatasetError(f"{qpath}: question {i} needs a non-empty string `question`")
        parse = _parse_hipporag if "paragraphs" in rec else _parse_simple
        try:
            q, missing = parse(rec, i, index)
        except DatasetError as exc:
            raise DatasetError(f"{qpath}: {exc}") from None
        unresolved += [f"{title!r} ({q.id})" for title in missing]
        out.append(q)
    if limit is not None:
        out = out[: max(0, limit)]
    if not out:
        raise DatasetError(f"{qpath}: no questions")
    return Dataset(
        name=qpath.parent.name if qpath.stem == "questions" else qpath.stem,
        questions=out,
        corpus=passages,
        corpus_hash=corpus_hash(passages),
        unresolved_gold=len(unresolved),
        unresolved_refs=unresolved,
    )
