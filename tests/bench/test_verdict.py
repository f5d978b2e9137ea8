"""The A/B and ablation verdict rule on hand-made result tables: every gain counts
(f1, recall@5, containment, negative_pass, tokens, speed), every guard holds, a change
that moves nothing is "same quality", and latency counts only when the per-question
latencies tell it apart from noise (constructed samples: no timing in these tests)."""

from __future__ import annotations

from typing import Any

import pytest
from graphroute.core.apps.bench.bench import VerdictRule, aggregate, per_question_wlt

BASE: dict[str, Any] = {
    "recall@5": 0.50, "containment": 0.54, "f1": 0.30, "negative_pass": 0.50, "false_negative": 0.02,
    "context_tokens_mean": 1000.0, "latency_ms_p50": 100.0,
}


def after(**changes: float) -> dict[str, Any]:
    return {**BASE, **changes}


def shifted(b: dict[str, Any], n: int = 30) -> tuple[list[float], list[float]]:
    """Per-question latencies where every question moves as B's p50 does (a real shift)."""
    return [BASE["latency_ms_p50"]] * n, [b["latency_ms_p50"]] * n


@pytest.mark.parametrize("b, verdict, reason", [
    # the case: vector_fallback lifts containment 0.54 -> 0.68 and costs tokens
    (after(containment=0.68, context_tokens_mean=1400.0), "KEEP", "containment +0.1400"),
    (after(negative_pass=0.80), "KEEP", "negative_pass +0.3000"),
    (after(latency_ms_p50=60.0), "KEEP", "p50 latency -40.0%"),
    (after(context_tokens_mean=900.0), "KEEP", "tokens -10.0%"),
    ({**BASE, "recall@5": 0.55}, "KEEP", "recall@5 +0.0500"),
    (after(f1=0.31), "KEEP", "f1 +0.0100"),
    (dict(BASE), "SAME", "same quality"),
    (after(containment=0.545, latency_ms_p50=105.0, context_tokens_mean=1010.0), "SAME", "same quality"),
    (after(latency_ms_p50=130.0), "REVERT", "p50 latency +30.0%"),
    (after(context_tokens_mean=1200.0), "REVERT", "tokens +20.0%"),
    (after(containment=0.50, latency_ms_p50=50.0), "REVERT", "containment dropped"),
    (after(negative_pass=0.45, containment=0.70), "REVERT", "negative_pass dropped"),
    # "not found" for everything: negative pass soars, answerable questions lose their answers
    (after(negative_pass=1.0, false_negative=0.40), "REVERT", "false_negative rose"),
    (after(f1=0.28, containment=0.70), "REVERT", "f1 dropped"),
])
def test_verdict_sees_every_gain_and_every_loss(b: dict[str, Any], verdict: str, reason: str) -> None:
    got, reasons = VerdictRule().decide(BASE, b, shifted(b))
    assert got == verdict, reasons
    assert any(reason in r for r in reasons), reasons


def test_speed_threshold_is_a_parameter() -> None:
    b = after(latency_ms_p50=85.0)  # 15% faster
    assert VerdictRule().decide(BASE, b, shifted(b))[0] == "KEEP"
    assert VerdictRule(min_speed_gain=0.15).decide(BASE, b, shifted(b))[0] == "KEEP"
    assert VerdictRule(min_speed_gain=0.2).decide(BASE, b, shifted(b))[0] == "SAME"


def mixed(faster: int, slower: int) -> tuple[list[float], list[float]]:
    """A at 100 ms on every question; B at 60 ms on ``faster`` of them and 110 ms on ``slower``."""
    return [100.0] * (faster + slower), [60.0] * faster + [110.0] * slower


@pytest.mark.parametrize("change", [{}, {"context_tokens_mean": 1010.0}, {"containment": 0.545}])
@pytest.mark.parametrize("p50", [60.0, 140.0])
def test_latency_within_noise_does_not_flip_equal_quality(change: dict[str, float], p50: float) -> None:
    # p50 40% off, but B is faster on 15 questions and slower on 15: a coin could do that
    got, reasons = VerdictRule().decide(BASE, after(latency_ms_p50=p50, **change), mixed(15, 15))
    assert got == "SAME", reasons
    assert "within noise" in reasons[-1], reasons
    assert "B faster on 15, slower on 15 of 30 questions" in reasons[-1]


def test_latency_counts_once_the_questions_agree() -> None:
    b = after(latency_ms_p50=60.0)
    # two-sided sign test at 30 pairs: 21 one way is p = 0.043, 20 is p = 0.099
    assert VerdictRule().decide(BASE, b, mixed(21, 9))[0] == "KEEP"
    assert VerdictRule().decide(BASE, b, mixed(20, 10))[0] == "SAME"
    assert VerdictRule(latency_alpha=0.1).decide(BASE, b, mixed(20, 10))[0] == "KEEP"
    slow = after(latency_ms_p50=140.0)
    assert VerdictRule().decide(BASE, slow, mixed(9, 21))[0] == "REVERT"


def test_latency_cannot_decide_what_the_run_cannot_tell_apart() -> None:
    b = after(latency_ms_p50=60.0)
    # five questions all faster: p = 2 / 32 > 0.05, too few to tell a shift from chance
    assert VerdictRule().decide(BASE, b, shifted(b, n=5))[0] == "SAME"
    assert VerdictRule().decide(BASE, b, shifted(b, n=6))[0] == "KEEP"
    got, reasons = VerdictRule().decide(BASE, b)  # no per-question latencies at all
    assert got == "SAME" and "not counted" in reasons[-1], reasons


def test_a_quality_gain_still_wins_when_latency_is_noise() -> None:
    got, reasons = VerdictRule().decide(BASE, after(containment=0.68, latency_ms_p50=150.0), mixed(15, 15))
    assert got == "KEEP" and reasons[0] == "containment +0.1400", reasons
    assert not any(r.startswith("(cost: p50") for r in reasons), reasons


def test_missing_metrics_count_as_unchanged() -> None:
    a = {"recall@5": 0.5, "containment": None, "negative_pass": None, "latency_ms_p50": 10.0}
    b = {"recall@5": 0.5, "containment": None, "negative_pass": None, "latency_ms_p50": 10.0}
    assert VerdictRule().decide(a, b)[0] == "SAME"


def _rec(qid: str, answerable: bool, negative: bool, recall: float | None, contained: bool | None) -> dict[str, Any]:
    return {"id": qid, "answerable": answerable, "gold": [1] if recall is not None else [], "ranked": [],
            "recall@2": recall, "recall@5": recall, "recall@10": recall, "signal_rank": 1 if recall else None,
            "containment": contained, "em": None, "f1": None, "negative": negative,
            "negative_pass": None if answerable else float(negative),
            "context_tokens": 10, "chunks": 1, "latency_ms": 1.0}


def test_aggregate_splits_answerable_and_unanswerable() -> None:
    recs = [
        _rec("a1", True, False, 1.0, True),
        _rec("a2", True, True, 0.0, False),  # answered "not found": a false negative
        _rec("u1", False, True, None, None),
        _rec("u2", False, False, None, None),
        _rec("u3", False, True, None, None),
    ]
    m = aggregate(recs)
    assert (m["answerable"], m["unanswerable"]) == (2, 3)
    assert m["recall@5"] == 0.5 and m["containment"] == 0.5
    assert m["negative_pass"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["false_negative"] == 0.5


def test_recall_ignores_gold_of_unanswerable_questions() -> None:
    answerable = _rec("a", True, False, 1.0, True)
    marked = {**_rec("u", False, True, 0.0, None), "gold": [7]}  # gold kept by mistake
    assert aggregate([answerable, marked])["recall@5"] == 1.0


def test_per_question_wins_count_negative_pass_on_unanswerable_questions_only() -> None:
    a = [_rec("a", True, False, 1.0, True), _rec("u", False, False, None, None)]
    b = [_rec("a", True, True, 1.0, False), _rec("u", False, True, None, None)]
    wlt = per_question_wlt(a, b)
    assert (wlt["negative_pass"]["wins"], wlt["negative_pass"]["losses"]) == (1, 0)
    assert (wlt["containment"]["wins"], wlt["containment"]["losses"]) == (0, 1)
