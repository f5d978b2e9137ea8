"""Metric definitions: SQuAD normalisation, aliases, containment, passage recall, ranks."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.apps.bench import metrics as M
from hypothesis import given
from hypothesis import strategies as st


def test_squad_normalisation_drops_case_punctuation_and_articles() -> None:
    assert M.normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert M.normalize_answer("an Apple a day") == "apple day"


def test_exact_match_takes_the_best_alias() -> None:
    assert M.exact_match("the USA", ["United States", "USA"]) == 1.0
    assert M.exact_match("U.S.", ["United States"]) == 0.0


def test_f1_is_token_overlap_best_over_aliases() -> None:
    # "paris france" vs "paris": precision 1/2, recall 1 -> 2/3
    assert M.f1_score("Paris, France", ["Paris"]) == pytest.approx(2 / 3)
    assert M.f1_score("Paris, France", ["Lyon", "Paris France"]) == 1.0
    assert M.f1_score("nothing", ["Paris"]) == 0.0
    assert M.f1_score("", []) == 0.0


def test_containment_is_case_insensitive_and_ignores_line_breaks() -> None:
    ctx = "[1] The capital is\nNew   York City."
    assert M.contains_answer(ctx, ["new york"])
    assert M.contains_answer(ctx, ["Boston", "NEW YORK CITY"])
    assert not M.contains_answer(ctx, ["Boston"])
    assert not M.contains_answer(ctx, [""])


def test_recall_at_k_is_the_hipporag_definition() -> None:
    ranked = [7, 3, 9, 1]
    assert M.recall_at_k(ranked, [3, 1], 2) == 0.5
    assert M.recall_at_k(ranked, [3, 1], 4) == 1.0
    assert M.recall_at_k(ranked, [5], 10) == 0.0
    assert M.recall_at_k(ranked, [], 2) is None


def test_first_gold_rank_is_one_based() -> None:
    assert M.first_gold_rank([7, 3, 9], [9, 3]) == 2
    assert M.first_gold_rank([7], [1]) is None


def test_dedupe_keeps_first_occurrence() -> None:
    assert M.dedupe(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=50),
       st.sampled_from([0, 5, 50, 95, 100]))
def test_percentile_matches_numpy(values: list[float], q: int) -> None:
    assert M.percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-9)


def test_negative_pass_counts_only_unanswerable_questions() -> None:
    negatives = [True, False, True, False]
    answerable = [False, False, True, True]
    assert M.negative_pass(negatives, answerable) == 0.5
    assert M.false_negative_rate(negatives, answerable) == 0.5
    assert M.negative_pass([True], [True]) is None


def test_count_tokens_counts_words_and_punctuation() -> None:
    assert M.count_tokens("Hello, world!") == 4
    assert M.count_tokens("") == 0


def test_sign_test_counts_pairs_and_drops_ties() -> None:
    a = [10.0, 10.0, 10.0, 10.0]
    assert M.sign_test(a, [9.0, 9.0, 11.0, 10.0]) == (2, 1, 1.0)
    assert M.sign_test(a, a) == (0, 0, 1.0)
    lower, higher, p = M.sign_test([1.0] * 6, [0.5] * 6)
    assert (lower, higher) == (6, 0) and p == pytest.approx(2 / 64)
    # 21 of 30 one way: sum(C(30, k), k >= 21) / 2**30, doubled
    p21 = M.sign_test([1.0] * 30, [0.5] * 21 + [2.0] * 9)[2]
    assert p21 == pytest.approx(0.04277, abs=1e-4)
