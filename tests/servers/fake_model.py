"""A stand-in model for the loopback OpenAI server: plausible, deterministic replies to each
of graphroute's own prompts, so a whole LLM route (NER, query classification, decomposition,
synthesis, OpenIE, community summaries) runs end to end with no network.

It reads the request the way a model would - the question, the numbered context - and answers
with simple text rules: names are the question's capitalised spans, the answer is the context
sentence that shares the most words with the question, cited. It knows nothing else; figures
measured with it are this fake's, not a real model's.

    from tests.servers.fake_model import install
    install(fake_openai)            # every graphroute prompt gets its rule
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

# the system prompts of graphroute's LLM stages, matched by a distinctive phrase
NER = r"^Extract the names of the entities"
DECOMPOSE = r"^Split the question into the simple sub-questions"
CLASSIFY = r"^Classify the question into one query type"
SYNTHESIS = r"^You answer questions using only the numbered context passages"
OPENIE = r"^You build a knowledge graph from one passage"
SUMMARY = r"^You summarise one community of a knowledge graph"
PROMPTS = {"ner": NER, "decompose": DECOMPOSE, "classify": CLASSIFY, "synthesis": SYNTHESIS,
           "openie": OPENIE, "summary": SUMMARY}

NOT_FOUND = "Not found in the indexed documents."
_CAPS = re.compile(r"\b[A-Z][\w'-]*(?:[ \t]+(?:(?:of|the|de|and|&)[ \t]+)?[A-Z][\w'-]*)*")
_WORD = re.compile(r"\w+")
_BLOCK = re.compile(r"^\[(\d+)\] (.*?)(?=^\[\d+\] |^Question: |\Z)", re.M | re.S)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_STOP = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "are", "was", "were", "be", "been", "what", "who", "whom", "whose", "which", "when", "where", "why", "how", "did", "does", "do", "that", "this", "it", "its", "as", "he", "she", "they", "his", "her", "their"]
)


class ServerLike(Protocol):
    def on(self, pattern: str, fn: Any) -> None: ...


def _user(body: dict[str, Any]) -> str:
    """The request's first user message (a repair round appends its own after it)."""
    users = [str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user"]
    return users[0] if users else ""


def _question(user: str) -> str:
    m = re.search(r"^Question: (.*)$", user, re.M)
    return (m.group(1) if m else user).strip()


def names(text: str) -> list[str]:
    """Capitalised spans, the sentence-initial question word dropped."""
    out: list[str] = []
    for m in _CAPS.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower() in _STOP:
            words = words[1:]
        name = " ".join(words).strip(" .'")
        if name and name not in out:
            out.append(name)
    return out


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def ner(body: dict[str, Any]) -> str:
    return json.dumps({"entities": names(_question(_user(body)))})


def decompose(body: dict[str, Any]) -> str:
    q = _user(body).strip().rstrip("?")
    parts = [p.strip() for p in re.split(r",| and (?=[a-z])", q) if p.strip()]
    return json.dumps({"questions": [p + "?" for p in parts] or [q + "?"]})


def classify(body: dict[str, Any]) -> str:
    q = _user(body).lower()
    profile = "cross_doc_comparison" if "compare" in q else "fact_extraction" if len(q.split()) < 8 else "multi_hop"
    return json.dumps({"profile": profile})


def synthesis(body: dict[str, Any]) -> str:
    """The context sentence sharing the most content words with the question, cited."""
    user = _user(body)
    q = _terms(_question(user))
    best: tuple[int, int, str] | None = None
    for m in _BLOCK.finditer(user):
        n, block = int(m.group(1)), m.group(2)
        text = "\n".join(line for line in block.splitlines() if not line.startswith("Source: "))
        for s in _SENTENCE.findall(text):
            overlap = len(q & _terms(s))
            if overlap and (best is None or overlap > best[0]):
                best = (overlap, n, s.strip())
    if best is None:
        return NOT_FOUND
    return f"{best[2]} [{best[1]}]"


def openie(body: dict[str, Any]) -> str:
    found = names(_user(body).split("\n\n", 1)[-1])  # the passage, not its "Title: ..." line
    triples = [[found[0], "is related to", o] for o in found[1:3]] if found else []
    return json.dumps({"entities": found, "triples": triples})


def summary(body: dict[str, Any]) -> str:
    m = re.search(r"^Entities: (.*)$", _user(body), re.M)
    ents = [e.strip() for e in (m.group(1) if m else "").split(",") if e.strip()]
    title = ", ".join(ents[:3]) or "Unnamed theme"
    return json.dumps({"title": title, "summary": f"Passages about {title}."})


RULES = {"ner": ner, "decompose": decompose, "classify": classify, "synthesis": synthesis,
         "openie": openie, "summary": summary}


def install(server: ServerLike) -> None:
    """Give ``server`` (a FakeOpenAI) a rule for every graphroute prompt."""
    for key, pattern in PROMPTS.items():
        server.on(pattern, RULES[key])
