"""A tiny real benchmark: 8 passages, 4 questions, the real embedded store and models.

The index profile keeps only the skeleton steps (no entity graph) so the bench tests
exercise the bench machinery, not the slower index steps other packages test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.apps.bench.bench import BenchRunner
from graphroute.core.apps.bench.datasets import Dataset, load_dataset
from graphroute.core.config.settings import Settings

PASSAGES = [
    {"title": "Lake Baikal", "text": "Lake Baikal is a rift lake in Siberia. It is the deepest lake in the world, reaching 1,642 metres."},
    {"title": "Irkutsk", "text": "Irkutsk is a city near Lake Baikal. The city was founded in 1661 as a winter camp for gold traders."},
    {"title": "Mercury", "text": "Mercury is the smallest planet of the Solar System and the closest planet to the Sun."},
    {"title": "Mercury", "text": "Mercury is a chemical element with the symbol Hg. It is the only metal that is liquid at room temperature."},
    {"title": "Hevelius", "text": "Johannes Hevelius was an astronomer in Danzig. He catalogued the positions of many stars with a sextant."},
    {"title": "Danzig", "text": "Danzig is the German name of Gdansk, a port city on the Baltic coast of Poland."},
    {"title": "Saffron", "text": "Saffron is a spice derived from the flower of Crocus sativus. It is among the most expensive spices by weight."},
    {"title": "Paella", "text": "Paella is a rice dish from Valencia. Traditional paella is coloured with saffron."},
]

QUESTIONS = [
    {"id": "baikal", "question": "In which year was the city near the deepest lake in the world founded?",
     "answer": "1661", "answer_aliases": [], "answerable": True,
     "paragraphs": [{"title": "Lake Baikal", "paragraph_text": PASSAGES[0]["text"], "is_supporting": True},
                    {"title": "Irkutsk", "paragraph_text": PASSAGES[1]["text"], "is_supporting": True}]},
    {"id": "hg", "question": "Which element has the symbol Hg?", "answer": "Mercury", "answer_aliases": ["quicksilver"],
     "answerable": True,
     "paragraphs": [{"title": "Mercury", "paragraph_text": PASSAGES[3]["text"], "is_supporting": True},
                    {"title": "Mercury", "paragraph_text": PASSAGES[2]["text"], "is_supporting": False}]},
    {"id": "hevelius", "question": "On which sea coast is the city where Johannes Hevelius worked?",
     "answer": "Baltic", "answer_aliases": ["Baltic Sea"], "answerable": True,
     "paragraphs": [{"title": "Hevelius", "paragraph_text": PASSAGES[4]["text"], "is_supporting": True},
                    {"title": "Danzig", "paragraph_text": PASSAGES[5]["text"], "is_supporting": True}]},
    {"id": "paella", "question": "Which flower gives the spice that colours paella?", "answer": "Crocus sativus",
     "answer_aliases": [], "answerable": True,
     "paragraphs": [{"title": "Paella", "paragraph_text": PASSAGES[7]["text"], "is_supporting": True},
                    {"title": "Saffron", "paragraph_text": PASSAGES[6]["text"], "is_supporting": True}]},
]

PROFILE = """\
name: bench-test
segmenter: {use: spacy}
embedder: {use: local}
steps:
  - use: sentence_knn
    with: {threshold: 0.90, k: 2}
"""


@pytest.fixture(scope="session")
def bench_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bench-data")
    (d / "corpus.json").write_text(json.dumps(PASSAGES), encoding="utf-8")
    (d / "questions.json").write_text(json.dumps(QUESTIONS), encoding="utf-8")
    (d / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    (d / "cache").mkdir()
    (d / "store").mkdir()
    return {"dir": d, "corpus": d / "corpus.json", "questions": d / "questions.json",
            "profile": d / "profile.yaml", "cache": d / "cache", "store": d / "store"}


@pytest.fixture(scope="session")
def dataset(bench_files: dict[str, Path]) -> Dataset:
    return load_dataset(bench_files["questions"], bench_files["corpus"])


def make_runner(bench_files: dict[str, Path], dataset: Dataset) -> BenchRunner:
    settings = Settings()
    settings.cache_dir = bench_files["cache"]
    return BenchRunner(dataset, store=str(bench_files["store"]), profile=str(bench_files["profile"]),
                       settings=settings)


@pytest.fixture(scope="session")
def runner(bench_files: dict[str, Path], dataset: Dataset) -> Iterator[BenchRunner]:
    r = make_runner(bench_files, dataset)
    r.prepare()
    yield r
    r.close()
