"""Check questions.json against a built corpus.json (see build_corpus.py).

    python check_questions.py corpus.json [questions.json]

Prints every violation and exits 1 when there is one. The rules the questions were written to:
ids unique; an answerable question is `single` (one gold passage, or several that each hold
the answer) or `multi` (two gold passages, one hop each);
every gold title is a corpus title; its answer (or an alias) occurs in a gold passage; it
shares no run of five words with a gold passage (the question paraphrases); at most three
questions a page; a `near_miss` question names in `absent` the terms the corpus must not hold
(matched as whole terms: "onexc" is not in "nonexclusive").
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

RUN = 5  # words a question may not share in a row with its gold passage
_WORD = re.compile(r"[a-z0-9_]+")


def runs(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


def page_of(title: str, titles: set[str]) -> str:
    """The page a passage title belongs to: its longest "Page" prefix that is a title."""
    parts = title.split(": ")
    return next((": ".join(parts[:k]) for k in range(len(parts) - 1, 0, -1) if ": ".join(parts[:k]) in titles), parts[0])


def violations(corpus: list[dict[str, str]], questions: list[dict[str, Any]]) -> list[str]:
    text = {p["title"]: p["text"] for p in corpus}
    everything = [(p["title"] + "\n" + p["text"]).lower() for p in corpus]
    out = [f"{qid}: duplicate id" for qid, n in Counter(q.get("id") for q in questions).items() if n > 1]
    per_page: dict[str, list[str]] = defaultdict(list)
    for q in questions:
        qid = q.get("id", "?")
        if q.get("answerable") is True:
            gold = q.get("gold", [])
            hops = {"single": 1, "multi": 2}.get(q.get("type", ""))
            if hops is None or q.get("hops") != hops or not (len(gold) == hops or hops == 1 <= len(gold)):
                out.append(f"{qid}: type {q.get('type')!r} with hops {q.get('hops')} and {len(gold)} gold passages")
            out += [f"{qid}: gold title not in the corpus: {g!r}" for g in gold if g not in text]
            known = [g for g in gold if g in text]
            answers = [a for a in [q.get("answer", ""), *q.get("aliases", [])] if a]
            if not any(a.lower() in text[g].lower() for a in answers for g in known):
                out.append(f"{qid}: no gold passage holds {answers}")
            for g in known:
                if shared := runs(q["question"]) & runs(text[g]):
                    out.append(f"{qid}: shares {' '.join(min(shared))!r} with {g!r}")
            for page in {page_of(g, set(text)) for g in gold}:
                per_page[page].append(qid)
        elif q.get("answerable") is False and q.get("type") in ("near_miss", "off_topic"):
            if q["type"] == "near_miss" and not q.get("absent"):
                out.append(f"{qid}: a near miss names no absent term")
            for term in q.get("absent", []):
                pattern = re.compile(r"(?<!\w)" + re.escape(term.lower()) + r"(?!\w)")
                if any(pattern.search(t) for t in everything):
                    out.append(f"{qid}: absent term {term!r} is in the corpus")
        else:
            out.append(f"{qid}: answerable {q.get('answerable')!r} with type {q.get('type')!r}")
    out += [f"{','.join(ids)}: more than three questions on page {page!r}" for page, ids in per_page.items() if len(ids) > 3]
    return out


def main() -> None:
    corpus_file = Path(sys.argv[1])
    questions_file = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).with_name("questions.json")
    found = violations(json.loads(corpus_file.read_text(encoding="utf-8")),
                       json.loads(questions_file.read_text(encoding="utf-8")))
    for v in found:
        print("violation:", v)
    print(f"violations: {len(found)}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
