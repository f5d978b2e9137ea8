"""Benchmark metrics: passage recall, signal rank, containment, EM/F1, negative pass.

Pure functions over plain values so they are easy to test and to reuse outside the bench
runner. Conventions follow /work/shared/datasets/README.md and the HippoRAG evaluation:

* passage ``recall@k`` = |gold ∩ top-k ranked passages| / |gold| for one question, averaged
  over questions by the caller;
* ``containment`` = the gold answer or one of its aliases appears in the context given to the
  synthesizer, case-insensitive (whitespace runs collapsed, so line breaks in a context do
  not hide an answer);
* ``em`` / ``f1`` use the SQuAD answer normalisation (lower case, no punctuation, no
  articles, single spaces) and take the best value over the answer and its aliases.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

H = TypeVar("H", bound=Hashable)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


# --------------------------------------------------------------------------- answers


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, drop punctuation and articles, collapse spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in golds if g is not None) else 0.0


def _f1_one(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        # SQuAD convention: both empty is a match, one empty is not
        return 1.0 if pred_tokens == gold_tokens else 0.0
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Iterable[str]) -> float:
    """Token F1 after normalisation, best over the gold answer and its aliases."""
    scores = [_f1_one(prediction, g) for g in golds if g is not None]
    return max(scores) if scores else 0.0


def _squash(text: str) -> str:
    return _WS.sub(" ", text.lower()).strip()


def contains_answer(context: str, golds: Iterable[str]) -> bool:
    """True when any non-empty gold answer occurs in the context, case-insensitive."""
    hay = _squash(context)
    return any(needle and needle in hay for needle in (_squash(g) for g in golds if g))


# --------------------------------------------------------------------------- rankings


def dedupe(items: Iterable[H]) -> list[H]:
    """Keep the first occurrence of each item, in order (a ranking of passages)."""
    seen: set[H] = set()
    out: list[H] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def recall_at_k(ranked: Sequence[Hashable], gold: Iterable[Hashable], k: int) -> float | None:
    """|gold ∩ top-k| / |gold|; None when the question has no gold passages."""
    gold_set = set(gold)
    if not gold_set:
        return None
    top = set(ranked[:k])
    return len(gold_set & top) / len(gold_set)


def first_gold_rank(ranked: Sequence[Hashable], gold: Iterable[Hashable]) -> int | None:
    """1-based rank of the first gold passage in the ranking, None when none is ranked."""
    gold_set = set(gold)
    for i, item in enumerate(ranked, start=1):
        if item in gold_set:
            return i
    return None


# --------------------------------------------------------------------------- aggregates


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None when there are none."""
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default method), q in [0, 100]."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def count_tokens(text: str) -> int:
    """Approximate token count: words and punctuation marks.

    No tokenizer model ships offline, so this one counter is used for every route; it is
    close to a BPE count for English prose and, more importantly, comparable between runs.
    """
    return len(_TOKEN.findall(text))


def negative_pass(negatives: Sequence[bool], answerable: Sequence[bool]) -> float | None:
    """Share of unanswerable questions the route answered "not found"; None if none."""
    picks = [neg for neg, ok in zip(negatives, answerable, strict=True) if not ok]
    return sum(picks) / len(picks) if picks else None


def false_negative_rate(negatives: Sequence[bool], answerable: Sequence[bool]) -> float | None:
    """Share of answerable questions the route wrongly answered "not found"."""
    picks = [neg for neg, ok in zip(negatives, answerable, strict=True) if ok]
    return sum(picks) / len(picks) if picks else None


def sign_test(a: Sequence[float], b: Sequence[float]) -> tuple[int, int, float]:
    """Paired sign test of ``b`` against ``a`` (per-question latencies of two variants):
    (pairs where b is lower, pairs where b is higher, two-sided exact binomial p-value).

    Under "no difference" each untied pair is as likely to fall either way, so the count of
    lower ones is Binomial(n, 1/2). Distribution-free and blind to outliers (a GC pause on one
    question weighs as much as any other question); ties carry no sign and are left out."""
    lower = sum(1 for x, y in zip(a, b, strict=True) if y < x)
    higher = sum(1 for x, y in zip(a, b, strict=True) if y > x)
    n = lower + higher
    if n == 0:
        return 0, 0, 1.0
    tail = sum(math.comb(n, i) for i in range(max(lower, higher), n + 1)) / 2.0**n
    return lower, higher, min(1.0, 2.0 * tail)
