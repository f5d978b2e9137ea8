"""Question and corpus loading: HippoRAG JSON, JSONL, gold resolution by title AND text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.apps.bench.datasets import corpus_hash, load_corpus, load_dataset
from graphroute.core.errors import DatasetError

CORPUS = [
    {"title": "Mercury", "text": "Mercury is the smallest planet."},
    {"title": "Mercury", "text": "Mercury is a chemical element with symbol Hg."},
    {"title": "Venus", "text": "Venus is the second planet from the Sun."},
]


def write(path: Path, data: object, jsonl: bool = False) -> Path:
    if jsonl:
        path.write_text("\n".join(json.dumps(r) for r in data) + "\n", encoding="utf-8")  # type: ignore[attr-defined]
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_hipporag_gold_is_matched_by_title_and_text(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.json", CORPUS)
    questions = write(tmp_path / "questions.json", [{
        "id": "q1", "question": "What is the symbol of mercury?", "answer": "Hg", "answer_aliases": ["hg"],
        "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "Mercury", "paragraph_text": "Mercury is the smallest planet.", "is_supporting": False},
            {"idx": 1, "title": "Mercury", "paragraph_text": "Mercury is a chemical element with symbol Hg.", "is_supporting": True},
        ],
    }])
    ds = load_dataset(questions, corpus)
    q = ds.questions[0]
    assert q.gold == [1]  # the element, not the planet with the same title
    assert q.answers == ["Hg", "hg"]
    assert ds.unresolved_gold == 0
    assert ds.name == tmp_path.name


def test_jsonl_questions_with_title_refs_and_unanswerable(tmp_path: Path) -> None:
    corpus = write(tmp_path / "c.jsonl", CORPUS, jsonl=True)
    questions = write(tmp_path / "bank.jsonl", [
        {"id": "a", "question": "Which planet is second?", "answer": "Venus", "gold": ["Venus"]},
        {"id": "b", "question": "Mercury facts?", "answer": "small", "gold": ["Mercury"]},
        {"id": "c", "question": "Who won the 1990 world cup?", "answerable": False},
        {"question": "Ghost?", "answer": "x", "gold": [{"title": "Pluto", "text": "gone"}]},
    ], jsonl=True)
    ds = load_dataset(questions, corpus)
    by_id = {q.id: q for q in ds.questions}
    assert by_id["a"].gold == [2]
    assert by_id["b"].gold == [0, 1]  # a title-only reference matches every passage of that title
    assert by_id["c"].answerable is False and by_id["c"].answers == []
    assert ds.questions[3].id == "q3" and ds.unresolved_gold == 1 and ds.unresolved_refs == ["'Pluto' (q3)"]
    assert ds.describe()["unanswerable"] == 1
    assert len(load_dataset(questions, corpus, limit=2).questions) == 2


def test_corpus_hash_changes_with_content(tmp_path: Path) -> None:
    a = load_corpus(write(tmp_path / "a.json", CORPUS))
    b = load_corpus(write(tmp_path / "b.json", [*CORPUS[:2], {"title": "Venus", "text": "Changed."}]))
    assert corpus_hash(a) == corpus_hash(list(a))
    assert corpus_hash(a) != corpus_hash(b)


@pytest.mark.parametrize("content, needle", [
    ("{not json", "invalid JSON"),
    ('[{"title": "x"}]', "needs a string `text`"),
    ("[]", "empty"),
])
def test_bad_corpus_files_say_why(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=needle):
        load_corpus(p)


def test_a_gold_title_alone_is_one_reference_and_answerable_must_be_a_boolean(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.json", CORPUS)
    one = write(tmp_path / "one.jsonl", [{"id": "v", "question": "Second planet?", "answer": "Venus", "gold": "Venus"}], jsonl=True)
    ds = load_dataset(one, corpus)
    assert ds.questions[0].gold == [2] and ds.unresolved_gold == 0  # not its five letters
    for bad, needle in (({"gold": 7}, "`gold` must be a list"), ({"answerable": "false"}, "`answerable` must be true or false")):
        path = write(tmp_path / "bad.jsonl", [{"id": "b", "question": "Second planet?", "answer": "Venus", **bad}], jsonl=True)
        with pytest.raises(DatasetError, match=needle) as exc:
            load_dataset(path, corpus)
        assert str(path) in str(exc.value) and "question 0" in str(exc.value)


def test_question_without_text_is_an_error(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.json", CORPUS)
    questions = write(tmp_path / "q.jsonl", [{"id": "x", "answer": "y"}], jsonl=True)
    with pytest.raises(DatasetError, match="non-empty string `question`"):
        load_dataset(questions, corpus)


def test_musique_slice_resolves_every_gold_passage() -> None:
    root = Path("/work/shared/datasets/musique")
    if not root.is_dir():
        pytest.skip("musique dataset not present")
    ds = load_dataset(root / "questions.json", root / "corpus.json")
    assert len(ds.questions) == 100 and len(ds.corpus) == 1890
    assert ds.unresolved_gold == 0
    assert all(2 <= len(q.gold) <= 4 for q in ds.questions)
