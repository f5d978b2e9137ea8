"""Negative detection's corpus look-ups on every backend: on Neo4j through the store's
full-text index of the chunks (StoreTerms: no lexicon of the group is built in the client),
on the embedded store through the group's CorpusLexicon; both answer as a lexicon built from
the same texts does."""

from __future__ import annotations

import pytest
from graphroute.core.api.models import Evidence, Label, Node
from graphroute.core.api.store import GraphStore
from graphroute.plugins.synthesizers import builtin
from graphroute.plugins.synthesizers.builtin import (
    CorpusLexicon,
    NegativeFloor,
    StoreTerms,
    corpus_terms,
    negative_reason,
)

DOCS = [
    ("Travel policy", "Travel requests are approved by the employee's line manager."),
    ("Hollins Freight", "Hollins Freight plc signed the subscription agreement on 1 April 2023."),
    ("Offices", "The Bristol office is open from 07:00 to 20:00. Gdańsk has a smaller office."),
    ("Aschenbrödel", "Aschenbrödel is a ballet by Johann Strauss II."),
    ("Leave", "Annual leave is 27 days. Leave requests are approved in Meadow."),
    ("Roamwise", "The travel agency Roamwise books flights for employees."),
    ("Steam", "A fist of iron and the power of steam."),
    ("Fawell", "Harris W. Fawell was born in 1929 in West Chicago."),
    ("Brandenburg", "The Margraviate of Brandenburg was a principality. It'll Be Me is a song."),
    ("Installing on macOS", "Run PowerShell or the installer; the cache lives in ~/Library/Caches."),
    ("Uploads", "upload.retries (default 5). Fast uploads need the --parallel flag."),
    ("Configuration", "A vault's settings file:\n\n[retention]\n# in days\ndaily_span = 7\nweekly_span = 4\n\nEdit it and restart."),
]


def chunks(group: str, docs: list[tuple[str, str]], prefix: str = "c") -> list[Node]:
    out = []
    for i, (title, text) in enumerate(docs):
        out.append(Node(id=f"{prefix}d{i}", label=Label.DOCUMENT, group=group, doc_id=f"{prefix}d{i}", props={"title": title}))
        out.append(Node(id=f"{prefix}{i:03d}", label=Label.CHUNK, group=group, doc_id=f"{prefix}d{i}",
                        props={"text": text, "document": title, "index": 0}))
    return out


QUESTIONS = [
    "When did Hollins Freight sign the agreement?",
    "What is the capital of France?",
    "When does the lease of the Gdańsk office end?",
    "Who composed the ballet Aschenbrodl?",  # a spelling variant of a long word
    "Where was Harris W. Fawell born?",  # a name's words one word apart
    "When was the country that produced Fist Power taken?",  # both words known, never side by side
    "Did Bristol Hollins approve the leave?",  # both known, never in one chunk
    "Which travel agency books flights for employees?",
    "What was the Margaraviate of Brandenburg?",  # a typo the index holds as a stem ("margravi")
    "Who sang It'll Be Me?",  # a word with an apostrophe
    "Where does an installation on a Mac keep its cache?",  # the first part of a camel-case word ("macOS")
    "What is the default of upload.retries?",  # written as code, as the corpus writes it
    "What is the default of upload.timeout?",  # written as code, never in the corpus
    "What does the --fast flag do?",  # its word is in the corpus, the flag is not
    "What is the default of retention.weekly_span?",  # a key of the [retention] section
    "What is the default of retention.hourly_span?",  # no such key
]


def test_corpus_look_ups_answer_as_the_lexicon(store: GraphStore, make_group: object, monkeypatch: pytest.MonkeyPatch) -> None:
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    store.write(group, chunks(group, DOCS))
    # another group holding a France passage and the words side by side: never this group's answer
    store.write(crowd, chunks(crowd, [("France", "Paris is the capital of France. Fist Power, Bristol Hollins.")] * 30, prefix="x"))
    built: list[str] = []
    real = builtin.corpus_lexicon

    def counted(store: GraphStore, group: str, *, with_pairs: bool = False) -> CorpusLexicon:
        built.append(group)
        return real(store, group, with_pairs=with_pairs)

    monkeypatch.setattr(builtin, "corpus_lexicon", counted)
    terms = corpus_terms(store, group, with_pairs=True)
    lex = CorpusLexicon.build((f"{t}\n{x}" for t, x in DOCS), with_pairs=True)
    if store.backend == "embedded":
        assert isinstance(terms, CorpusLexicon) and built == [group]
    else:
        assert isinstance(terms, StoreTerms)
        assert not built  # no lexicon of the group is built in the client
    for words in [("hollin", "freight"), ("gdansk",), ("aschenbrodl",), ("france",), ("bristol", "hollin"), ("meadw",), ("harri", "fawell"), ("margaraviate",), ("it'll", "me"), ("mac", "cache")]:
        assert terms.has_together(words) == lex.has_together(words), words
    for a, b in [("harri", "fawell"), ("fist", "power"), ("hollin", "freight"), ("bristol", "hollin")]:
        assert terms.has_pair(a, b) == lex.has_pair(a, b), (a, b)
    for word in ["office", "gdansk", "pension", "aschenbrodl"]:
        assert terms.knows(word) == lex.knows(word), word
    assert lex.writes("retention.weekly_span") and not lex.writes("retention.hourly_span")
    for code in ["upload.retries", "upload.timeout", "--parallel", "--fast", "retention.weekly_span", "retention.hourly_span"]:
        assert terms.writes(code) == lex.writes(code), code
    # the same document frequency, also for a word the corpus has only in another form
    # ("approve": the index's stem matches "approved")
    for word in ["france", "freight", "office", "travel", "gdansk", "approve"]:
        assert terms.idf(word) == pytest.approx(lex.idf(word)), word
    floor = NegativeFloor(names_in_corpus=True, name_phrases=True, min_term_coverage=0.2)
    evidence = [Evidence(id="e", text=DOCS[5][1], score=1.0, document="d", document_id="d")]
    for q in QUESTIONS:
        got = negative_reason(q, evidence, floor, lambda: corpus_terms(store, group, with_pairs=True))
        assert got == negative_reason(q, evidence, floor, lambda: lex), q


def test_a_question_is_checked_in_a_few_store_round_trips(
    store: GraphStore, make_group: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StoreTerms.prepare asks the index for a question's look-ups together: at most four
    store calls (the name words as they are and the terms' counts; the other spellings of
    name words the index lacks, names' words together, rare terms' texts and pairs; the
    names that needed other spellings), plus, for a term no candidate text holds as the
    client spells it, the look-ups for its other spellings."""
    if store.backend == "embedded":
        pytest.skip("the embedded store answers from its lexicon in memory")
    group = make_group()  # type: ignore[operator]
    store.write(group, chunks(group, DOCS))
    calls: list[str] = []
    for name in ("match_texts", "count_texts"):
        real = getattr(store, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            calls.append(_name)
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(store, name, counted)  # the session's store: undone after the test
    floor = NegativeFloor(names_in_corpus=True, name_phrases=True, min_term_coverage=0.2)
    evidence = [Evidence(id="e", text=DOCS[5][1], score=1.0, document="d", document_id="d")]
    lex = CorpusLexicon.build((f"{t}\n{x}" for t, x in DOCS), with_pairs=True)
    for q in QUESTIONS:
        calls.clear()
        terms = StoreTerms(store, group)
        got = negative_reason(q, evidence, floor, lambda terms=terms: terms)  # type: ignore[misc]
        assert got == negative_reason(q, evidence, floor, lambda: lex), q
        unknown = [t for t in builtin.content_terms(q) if terms._df_of.get(t) == 0]
        assert 2 <= len(calls) <= 4 + 3 * len(unknown), (q, calls)


def test_a_word_count_is_the_groups_own_beside_another_group(store: GraphStore, make_group: object) -> None:
    """count_texts counts the asked group's chunks only, with another group holding the same
    words on the same server (and index); a group alone on its server skips that filter."""
    mine, other = make_group(), make_group()  # type: ignore[operator]
    store.write(mine, chunks(mine, DOCS[:3]))
    store.write(other, chunks(other, DOCS))
    words = ["france", "freight", "office", "travel"]
    lex = CorpusLexicon.build(f"{t}\n{x}" for t, x in DOCS[:3])
    got = store.count_texts(mine, words)
    if got is None:
        pytest.skip(f"the {store.backend} store keeps no full-text index")
    assert got == [sum(w in builtin.lexicon_terms(f"{t}\n{x}") for t, x in DOCS[:3]) for w in words]
    assert got != store.count_texts(other, words)
    if store.backend == "neo4j":  # a deleted group no longer counts against "alone"; written again, it does
        from graphroute.plugins.stores.neo4j_store import DELETED_FLAG

        def marked() -> object:
            return store._query("meta", f"MATCH (m:GRMeta {{group: $g}}) RETURN m.{DELETED_FLAG} AS d", g=other)[0]["d"]  # type: ignore[attr-defined]

        store.delete_group(other)
        assert marked() is True and store.count_texts(mine, words) == got
        store.write(other, chunks(other, DOCS))
        assert marked() is None and store.count_texts(mine, words) == got
    assert [lex.idf(w) for w in words] == pytest.approx([StoreTerms(store, mine).idf(w) for w in words])
