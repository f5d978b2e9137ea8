"""The benchmark sets shipped in examples/datasets: the Larkspur handbook, the Wrenfield Courier
newspaper archive, the Vellumdrift product documentation, the Quarrybank research computing
guide, the Brindlecombe water utility's records, the Markdown index profiles and the script
that makes the MuSiQue negatives set."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from graphroute.core.apps.bench.datasets import load_dataset
from graphroute.core.apps.bench.metrics import contains_answer

ROOT = Path(__file__).resolve().parents[2] / "examples" / "datasets"
MUSIQUE = Path("/work/shared/datasets/musique")


# (folder, documents, question kinds): the Larkspur handbook, the Wrenfield Courier archive, the
# Vellumdrift documentation, the Quarrybank research computing guide and the Brindlecombe Water
# Services records (minutes, email threads, incident reports, tickets, memos)
SETS = [
    ("larkspur", 61, {"single": 69, "multi": 38, "off_topic": 12, "near_miss": 22}),
    ("wrenfield", 55, {"single": 54, "multi": 42, "off_topic": 10, "near_miss": 25}),
    ("vellumdrift", 52, {"single": 60, "multi": 35, "off_topic": 10, "near_miss": 25}),
    ("quarrybank", 58, {"single": 62, "multi": 41, "off_topic": 10, "near_miss": 20}),
    ("brindlecombe", 39, {"single": 35, "multi": 25, "off_topic": 8, "near_miss": 12}),
]


@pytest.mark.parametrize(("name", "documents", "kinds"), SETS, ids=[s[0] for s in SETS])
def test_example_set_loads_and_every_answer_is_in_a_gold_document(
    name: str, documents: int, kinds: dict[str, int]
) -> None:
    folder = ROOT / name
    ds = load_dataset(folder / "questions.json", folder / "corpus.json")
    assert sum(f.stat().st_size for f in folder.iterdir()) < 1_000_000
    assert len(ds.corpus) == documents and ds.unresolved_gold == 0
    assert len({p.title for p in ds.corpus}) == documents  # gold titles name one document each
    assert Counter(q.metadata["type"] for q in ds.questions) == kinds
    for q in ds.questions:
        if q.answerable:
            assert q.gold and q.answers, q.id
            assert any(contains_answer(ds.corpus[i].text, q.answers) for i in q.gold), q.id
            assert (len(q.gold) >= 2) == (q.metadata["type"] == "multi"), q.id
            assert q.metadata["hops"] == len(q.gold), q.id
        else:
            assert not q.gold and not q.answers, q.id
    assert len({q.question for q in ds.questions}) == len(ds.questions)


def _five_word_runs(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}


def test_vellumdrift_questions_paraphrase_their_gold_pages() -> None:
    """No question shares a run of five words with its gold pages, so keyword overlap alone
    does not find them."""
    folder = ROOT / "vellumdrift"
    ds = load_dataset(folder / "questions.json", folder / "corpus.json")
    for q in ds.questions:
        runs = _five_word_runs(q.question)
        for i in q.gold:
            assert not runs & _five_word_runs(ds.corpus[i].text), (q.id, ds.corpus[i].title)


def _script(rel: str = "musique_negatives/make_negatives.py") -> ModuleType:
    path = ROOT / rel
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _q(qid: str, *titles: str) -> dict[str, Any]:
    return {"id": qid, "question": f"q {qid}?", "answer": "a",
            "paragraphs": [{"title": t, "paragraph_text": f"text of {t}", "is_supporting": True} for t in titles]}


def test_split_keeps_questions_sharing_a_passage_on_one_side() -> None:
    make = _script()
    questions = [_q("a", "P1", "P2"), _q("b", "P2", "P3"), _q("c", "P4"), _q("d", "P5"), _q("e", "P6"), _q("f", "P7")]
    chosen = make.split(questions, 0.5)
    assert len(chosen) <= 3
    assert ("a" in chosen) == ("b" in chosen)  # linked by P2
    assert chosen == make.split(list(reversed(questions)), 0.5)  # file order does not matter


def test_musique_negatives_remove_exactly_the_unanswerable_supporting_passages(tmp_path: Path) -> None:
    if not MUSIQUE.is_dir():
        pytest.skip("musique dataset not present")
    make = _script()
    stats = make.make(MUSIQUE, tmp_path / "a")
    assert stats["unanswerable"] == 50 and stats["questions"] == 100
    again = make.make(MUSIQUE, tmp_path / "b")
    assert stats == again
    for name in ("questions.json", "corpus.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    ds = load_dataset(tmp_path / "a" / "questions.json", tmp_path / "a" / "corpus.json")
    assert ds.unresolved_gold == 0  # every answerable question keeps all its passages
    full = load_dataset(MUSIQUE / "questions.json", MUSIQUE / "corpus.json")
    kept = {(p.title, p.text.strip()) for p in ds.corpus}
    for q, orig in zip(ds.questions, full.questions, strict=True):
        gold = {(full.corpus[i].title, full.corpus[i].text.strip()) for i in orig.gold}
        if q.answerable:
            assert gold <= kept and len(q.gold) == len(orig.gold)
        else:
            assert not gold & kept and not q.gold
    assert len(full.corpus) - len(ds.corpus) == stats["removed_passages"]


@pytest.mark.parametrize(("name", "chunk_sections"), [("index_markdown.yaml", "split"), ("index_markdown_pack.yaml", "pack")])
def test_markdown_profiles_are_the_default_but_for_the_reading(name: str, chunk_sections: str) -> None:
    """The Markdown profiles differ from the shipped default only in how a JSON corpus's
    entries are read and chunked, so their bench figures measure that and nothing else."""
    from graphroute.core.config.index_profile import load_index_profile

    md = load_index_profile(str(ROOT / name))
    default = load_index_profile("default")
    assert [(s.use, s.with_) for s in md.loaders] == [("json_corpus", {"markdown": True})]
    assert md.parse.chunk_sections == chunk_sections
    keep = {"name", "description", "loaders", "parse"}
    assert md.model_dump(exclude=keep) == default.model_dump(exclude=keep)
    assert md.parse.model_dump(exclude={"chunk_sections"}) == default.parse.model_dump(exclude={"chunk_sections"})


PYDOCS_PAGE = """<html><head><title>zipfile \u2014 Work with ZIP archives \u2014 Python 3.11 documentation</title></head>
<body><div class="body"><section id="zipfile">
<h1>zipfile \u2014 Work with ZIP archives<a class="headerlink" href="#zipfile">\u00b6</a></h1>
<p>The ZIP file format is a common archive and compression standard. This module provides tools to create,
read, write, append, and list a ZIP file, and it works with archives of any size that the format allows.</p>
<div class="highlight-python3"><pre>import zipfile</pre></div>
<section id="zipfile-objects"><h2>ZipFile Objects</h2>
<dl class="py class"><dt id="zipfile.ZipFile">class zipfile.ZipFile(file, mode='r')</dt>
<dd><p>Open a ZIP file, where file can be a path to a file or a file-like object. The mode parameter should be
'r' to read an existing file, 'w' to truncate and write a new file, or 'a' to append.</p></dd></dl>
<table><tr><td>Mode</td><td>Meaning</td></tr><tr><td>x</td><td>create and write a new file only</td></tr></table>
</section>
<section id="notes"><h2>Notes</h2><p>Too short to keep.</p></section>
</section></div></body></html>"""


def test_pydocs_builder_cuts_a_page_into_its_sections(tmp_path: Path) -> None:
    build = _script("pydocs/build_corpus.py")
    html = tmp_path / "html"
    (html / "library").mkdir(parents=True)
    (html / "library" / "zipfile.html").write_text(PYDOCS_PAGE, encoding="utf-8")
    (html / "library" / "zipfile-copy.html").write_text(PYDOCS_PAGE, encoding="utf-8")  # the same titles again
    (html / "genindex-Z.html").write_text(PYDOCS_PAGE, encoding="utf-8")  # an index page: left out
    corpus = build.build(html)
    titles = [p["title"] for p in corpus]
    page = "zipfile \u2014 Work with ZIP archives"
    # a repeated title takes its parent section's heading, or (the page's own) a counter
    assert titles == [page, f"{page}: ZipFile Objects", f"{page} (2)", f"{page}: ZipFile Objects (2)"]
    top, objects = corpus[0]["text"], corpus[1]["text"]
    assert "common archive" in top and "import zipfile" not in top and "ZipFile Objects" not in top  # no code, no subsection
    assert "\u00b6" not in top
    signature, description = objects.split("\n\n")[:2]
    assert signature == "class zipfile.ZipFile(file, mode='r')" and description.startswith("Open a ZIP file")
    assert "x | create and write a new file only" in objects  # a table row, its cells joined
    assert all(len(p["text"].split()) >= build.MIN_WORDS for p in corpus)  # "Notes" is too short


def test_pydocs_questions_follow_their_rules_on_a_corpus_shaped_like_theirs() -> None:
    check = _script("pydocs/check_questions.py")
    questions = json.loads((ROOT / "pydocs" / "questions.json").read_text(encoding="utf-8"))
    assert Counter(q["type"] for q in questions) == {"single": 45, "multi": 20, "near_miss": 15, "off_topic": 10}
    # the corpus itself is built from Debian's python3.11-doc (README); here, one that holds
    # each gold passage as the answer's sentence, which the rules that need no real text pass
    titles = {g for q in questions for g in q.get("gold", [])}
    corpus = [{"title": t, "text": " ".join(f"{q['answer']}." for q in questions if t in q.get("gold", []))}
              for t in sorted(titles)]
    found = check.violations(corpus, questions)
    assert found == [], found[:5]
    broken = [dict(questions[0], answer="NoSuchAnswer", aliases=[]), dict(questions[-16], absent=[])]
    assert [v.split(":")[0] for v in check.violations(corpus, broken)] == [questions[0]["id"], questions[-16]["id"]]
