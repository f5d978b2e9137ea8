"""Make the MuSiQue pairs set: questions that name two passages' subjects side by side.

Reads a HippoRAG-format MuSiQue slice (``questions.json``) and writes ``questions.json`` to
``--out``: for each question with two supporting passages of different titles, one question
that names both titles joined by "and" ("How are Carl Rogers and Person-centered therapy
related?"), whose gold passages are those two. The wording is one of four templates, chosen
by the SHA-256 of the question id, so the set is the same every time. The corpus is the
slice's own ``corpus.json``; every question is answerable by retrieval (recall of both
passages), and none has a reference answer.

    python examples/datasets/musique_pairs/make_pairs.py \
        --source /work/shared/datasets/musique --out .graphroute/datasets/musique-pairs
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

TEMPLATES = (
    "How are {a} and {b} related?",
    "What do {a} and {b} have in common?",
    "What links {a} and {b}?",
    "What is the connection between {a} and {b}?",
)


def pairs(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One pair question per source question with two differently titled supporting passages."""
    out: list[dict[str, Any]] = []
    for q in questions:
        titles = list(dict.fromkeys(str(p["title"]) for p in q.get("paragraphs") or [] if p.get("is_supporting")))
        if len(titles) < 2:
            continue
        a, b = titles[0], titles[1]
        pick = int(hashlib.sha256(str(q["id"]).encode("utf-8")).hexdigest(), 16) % len(TEMPLATES)
        out.append({
            "id": f"pair-{q['id']}", "question": TEMPLATES[pick].format(a=a, b=b), "answer": "", "aliases": [],
            "gold": [a, b], "answerable": True, "type": "pair", "hops": 2,
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, required=True, help="folder holding the slice's questions.json")
    ap.add_argument("--out", type=Path, required=True, help="folder to write questions.json to")
    args = ap.parse_args()
    made = pairs(json.loads((args.source / "questions.json").read_text(encoding="utf-8")))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "questions.json").write_text(json.dumps(made, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({"questions": len(made)}))


if __name__ == "__main__":
    main()
