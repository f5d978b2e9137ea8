"""Make the MuSiQue negatives set: half the questions lose their supporting passages.

Reads a HippoRAG-format MuSiQue slice (``questions.json`` and ``corpus.json``) and writes
the same two files to ``--out``:

* a fixed half of the questions (ordered by the SHA-256 of their id, so the split does not
  depend on file order) become unanswerable: every supporting passage of theirs is removed
  from the corpus, their paragraphs lose the ``is_supporting`` flag and they get
  ``"answerable": false``;
* the other half stay answerable, with all their supporting passages still in the corpus.

Questions that share a supporting passage are kept on the same side (one passage cannot be
both removed and kept), so the unanswerable half may be slightly below half. One index of
the written corpus serves both halves, and ``graphroute bench`` reports their containment and
``negative_pass`` side by side.

    python examples/datasets/musique_negatives/make_negatives.py \
        --source /work/shared/datasets/musique --out .graphroute/datasets/musique-negatives
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

Key = tuple[str, str]


def _supporting(rec: dict[str, Any]) -> list[Key]:
    return [(str(p["title"]), str(p["paragraph_text"]).strip())
            for p in rec.get("paragraphs") or [] if p.get("is_supporting")]


def _order(qid: str) -> str:
    return hashlib.sha256(qid.encode("utf-8")).hexdigest()


def split(questions: list[dict[str, Any]], share: float = 0.5) -> set[str]:
    """Ids of the questions to make unanswerable: groups of questions linked by a shared
    supporting passage, taken in hash order while the total stays within ``share``."""
    parent: dict[str, str] = {q["id"]: q["id"] for q in questions}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[Key, str] = {}
    for q in questions:
        for key in _supporting(q):
            if key in owner:
                parent[find(q["id"])] = find(owner[key])
            else:
                owner[key] = q["id"]
    groups: dict[str, list[str]] = {}
    for q in questions:
        groups.setdefault(find(q["id"]), []).append(q["id"])
    target = int(len(questions) * share)
    chosen: set[str] = set()
    for members in sorted(groups.values(), key=lambda m: min(_order(i) for i in m)):
        if len(chosen) + len(members) <= target:
            chosen.update(members)
    return chosen


def make(source: Path, out: Path, share: float = 0.5) -> dict[str, int]:
    questions = json.loads((source / "questions.json").read_text(encoding="utf-8"))
    corpus = json.loads((source / "corpus.json").read_text(encoding="utf-8"))
    negative = split(questions, share)
    removed: set[Key] = {k for q in questions if q["id"] in negative for k in _supporting(q)}
    kept_corpus = [p for p in corpus if (str(p["title"]), str(p["text"]).strip()) not in removed]
    written: list[dict[str, Any]] = []
    for q in questions:
        if q["id"] in negative:
            paragraphs = [{**p, "is_supporting": False} for p in q["paragraphs"]]
            q = {**q, "paragraphs": paragraphs, "answerable": False,
                 "removed_supporting": [t for t, _ in _supporting(q)]}
        written.append(q)
    out.mkdir(parents=True, exist_ok=True)
    (out / "questions.json").write_text(json.dumps(written, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / "corpus.json").write_text(json.dumps(kept_corpus, ensure_ascii=False, indent=1), encoding="utf-8")
    return {"questions": len(written), "unanswerable": len(negative), "passages": len(kept_corpus),
            "removed_passages": len(corpus) - len(kept_corpus)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, required=True, help="folder with questions.json and corpus.json (HippoRAG MuSiQue)")
    ap.add_argument("--out", type=Path, required=True, help="folder to write questions.json and corpus.json to")
    ap.add_argument("--share", type=float, default=0.5, help="share of questions made unanswerable [0.5]")
    args = ap.parse_args()
    print(json.dumps(make(args.source, args.out, args.share)))


if __name__ == "__main__":
    main()
