"""Built-in synthesizers: extractive (offline default), negative detection, LLM synthesis.

Every synthesizer answers from ``state.context`` / ``state.context_evidence`` as assembled
by ``token_budget``: the ``[n]`` markers in an answer are the context's block numbers, and
``state.citations`` maps each one to its evidence (document, section, offsets, text).

Negative detection ("never invent", route2 §2): when there is no context, or the best
evidence is below a configurable floor, the answer is exactly
``Not found in the indexed documents.`` and ``state.negative`` is True. The check is built
into every synthesizer and also exists as its own stage, ``negative_detection``, a DENOISER
placed between ``token_budget`` and the synthesizer so a route can make the floor explicit
and visible in the trace. When it fires, it writes the negative answer and clears the
context; the synthesizers that follow see ``state.negative`` and leave the answer alone.
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

import numpy as np
from graphroute.core.api.constants import NOT_FOUND
from graphroute.core.api.models import Citation, Evidence, Label
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.api.store import (
    GraphStore,
    TextMatch,
    counted_nodes,
    document_titles,
    per_version,
)
from graphroute.core.errors import LLMNotConfiguredError, RemoteCallError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.communities import (
    THEMATIC_COMMUNITIES,
    community_texts,
    nearest_communities,
)
from graphroute.core.lib.layout import cited_boxes
from graphroute.core.lib.llm import LLMStageParams, record_usage
from pydantic import Field

# ----------------------------------------------------------------------------- text helpers

_STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "nor", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about", "as", "into", "onto", "over", "under", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "have", "has", "had", "having", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "that", "this", "these", "those", "there", "here", "it", "its", "it's", "he", "she", "they", "them", "his", "her", "their", "our", "your", "my", "me", "we", "you", "i", "not", "no", "yes", "if", "then", "than", "so", "such", "very", "much", "many", "more", "most", "some", "any", "all", "each", "every", "both", "either", "neither", "one", "also", "only", "just", "out", "up", "down", "off", "again", "further", "once", "same", "other", "another", "s", "t", "name", "named", "tell", "give", "list", "find", "show", "describe", "explain", "according", "document", "documents"]
)
# letters and digits of any script ("Gdańsk", "Purkyně"), with an inner apostrophe ("it'll")
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace
# and an upper-case letter, digit or opening quote/bracket.
_SENT_END_RE = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREV = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "ltd", "inc", "co", "corp", "vs", "etc", "no", "nos", "fig", "e.g", "i.e", "u.s", "p.o", "approx", "dept", "est"]
)


@lru_cache(maxsize=1 << 14)
def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) spans of the sentences of ``text``: a light regex splitter.

    It does not split after common abbreviations (``Ltd.``, ``Dr.``, ``P.O.``) or single
    initials (``J. Smith``); good enough for picking answer sentences, which is all the
    extractive synthesizer needs (index-time segmentation uses spaCy). Memoised with the
    word functions below, for the same reason: the same passages come back question after
    question.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENT_END_RE.finditer(text):
        head = text[start : m.start() + 1]
        last = head.rsplit(None, 1)[-1].rstrip(".").lower() if head.strip() else ""
        if last in _ABBREV or (len(last) == 1 and last.isalpha()) or re.fullmatch(r"(?:[a-z]\.)+[a-z]", last):
            continue
        end = m.end()
        seg = text[start:end]
        s = start + (len(seg) - len(seg.lstrip()))
        e = start + len(seg.rstrip())
        if e > s:
            spans.append((s, e))
        start = end
    seg = text[start:]
    if seg.strip():
        s = start + (len(seg) - len(seg.lstrip()))
        spans.append((s, start + len(seg.rstrip())))
    return tuple(spans)


# Both are memoised: the extractive synthesizer scores every sentence of the context against
# the question, ~90 sentences and ~2,100 words a question on MuSiQue, and the same passages
# and words recur from question to question (cProfile, route2_local, 30 questions: 63,536
# ``_norm`` calls). The results are immutable, so sharing them between threads is safe.
def _fold(word: str) -> str:
    """Accents removed ("Aschenbrödel" and "Aschenbrodel" are one word)."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


@lru_cache(maxsize=1 << 16)
def _norm(word: str) -> str:
    """Lower case, accents folded, lightly singularised; "" for a stopword (checked before
    singularising, so "does" and "this" do not survive as "doe" and "thi")."""
    w = _fold(word).lower().replace("’", "'")
    if w in _STOPWORDS:
        return ""
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


@lru_cache(maxsize=1 << 14)
def content_terms(text: str) -> frozenset[str]:
    """Lower-cased, lightly singularised content words (stopwords removed).

    One set comprehension over ``findall`` rather than a loop over match objects: 15.2 ->
    10.8 us a sentence (MuSiQue passages), and the extractive synthesizer meets ~100 new
    sentences a question."""
    terms = {_norm(w) for w in _WORD_RE.findall(text)}
    terms -= _STOPWORDS
    terms.discard("")
    return frozenset(terms)


# A word written in camel case joins words ("macOS", "PowerShell", "iOS"): its parts are words
# of the text as well, so a question's "Mac" is found in a text that writes "macOS".
_CAMEL_RE = re.compile(r"[a-z][A-Z]")  # where a camel-case word joins two words
_CAMEL_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")


def _camel_parts(word: str) -> list[str]:
    return _CAMEL_PART_RE.findall(word) if _CAMEL_RE.search(word) else [word]


@lru_cache(maxsize=1 << 14)
def lexicon_terms(text: str) -> frozenset[str]:
    """The terms negative detection reads in a corpus text: :func:`content_terms`, and the
    normalised parts of the text's camel-case words ("macOS" -> "mac", "os")."""
    terms = content_terms(text)
    if not _CAMEL_RE.search(text):  # most texts: one scan
        return terms
    camel = [w for w in _WORD_RE.findall(text) if _CAMEL_RE.search(w)]
    parts = {_norm(p) for w in camel for p in _camel_parts(w)}
    parts.discard("")
    return terms | parts


def query_overlap(query_terms: Set[str], text: str) -> float:
    """Fraction of the query's content terms that occur in ``text`` (0 when none)."""
    if not query_terms:
        return 0.0
    return len(query_terms & content_terms(text)) / len(query_terms)


# ----------------------------------------------------------------------------- negatives


class NegativeFloor(StageParams):
    """The floor under which a route answers "not found" (shared by every synthesizer)."""

    min_chunks: int = Field(1, ge=0, description="Fewer context blocks than this -> not found (route2: 0 chunks).")
    min_score: float | None = Field(
        None,
        description="Best evidence score below this -> not found. Off by default: score scales "
        "differ per route (cosine, PPR mass, RRF), so set it per route.",
    )
    min_query_overlap: float = Field(
        0.0, ge=0.0, le=1.0,
        description="Best fraction of query content terms found in one context block below this "
        "-> not found (0 = off).",
    )
    names_in_corpus: bool = Field(
        False,
        description="Not found when a name in the question (its capitalised words after the first "
        "word, up to punctuation or a possessive, e.g. 'Hollins Freight', 'FIFA World Cup') occurs in no passage of the indexed "
        "corpus: all its words in one chunk, spelling variants of longer words allowed, and so "
        "the parts of camel-case words ('Mac' in 'macOS'), an acronym spelled out by a name or a "
        "heading ('FAQ'), a nationality word before a name apart from it. Also when a word the "
        "question writes as code ('--fast', 'upload.timeout') is written in no passage (a dotted "
        "name also as a key under its INI or TOML section: '[upload]', then 'timeout = 30').",
    )
    min_term_coverage: float = Field(
        0.0, ge=0.0, le=1.0,
        description="Not found when the question's content terms, weighted by their IDF in the "
        "corpus, are covered by the first `coverage_blocks` context blocks below this share "
        "(0 = off). A term the corpus never uses weighs the most. With the check on, a question "
        "with no content term at all (only stopwords, symbols or emoji) is not found.",
    )
    coverage_blocks: int = Field(
        5, ge=1, le=100, description="Context blocks (best first) that the term coverage reads.",
    )
    skip_absent_wording: bool = Field(
        True,
        description="The term coverage leaves out the question's verbs and adverbs (spaCy's tagger) "
        "that the corpus never uses: the question's own wording of what the documents say otherwise "
        "('seems to have moved back' / 'appears to have gone back'). A noun or adjective the corpus "
        "never uses still weighs the most. Only when the coverage is below the floor without it.",
    )
    name_phrases: bool = Field(
        False,
        description="With `names_in_corpus`: the words of a name must also stand next to each other "
        "in some chunk (one word between allowed: an initial, 'of'), not only occur in one chunk "
        "('Fist Power' is not found in a passage about a fist and electric power).",
    )
    coordinated_names: bool = Field(
        False,
        description="With `names_in_corpus`: a name that joins names with 'and' ('How are Carl Rogers "
        "and Person-centered therapy related?') is also found when each name it joins is, in "
        "chunks of its own; without, all its words must stand in one chunk, as for a company named "
        "'Procter and Gamble'.",
    )
    absent_nouns: bool = Field(
        False,
        description="Not found when a noun of the question (spaCy's tagger) occurs in no chunk of the "
        "corpus, e.g. 'pensions' in a handbook that never mentions one. Skipped: the words after "
        "'which'/'what' that name the kind of answer ('which year'), and a noun the parser makes the "
        "question's root (a verb mistagged as a noun).",
    )

    def needs_lexicon(self) -> bool:
        return self.names_in_corpus or self.min_term_coverage > 0 or self.absent_nouns


# Words that may join the capitalised words of one name ("Bank of England", "Vincent van Gogh").
_NAME_JOINERS = frozenset(["of", "the", "and", "de", "van", "von", "der", "den", "da", "di", "du", "del", "la", "le", "y", "for", "on", "in", "a", "&"])
# words, and the punctuation that ends a name ("Morgan Freeman, Robert De Niro" is two names)
_QTOKEN_RE = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*|[,;:()\[\]\"“”!?]")


_POSSESSIVE_RE = re.compile(r"['’]s$", re.IGNORECASE)


def _question_tokens(question: str) -> list[tuple[bool, str]]:
    """The question's tokens, each with whether it may be part of a name: a word after the
    first word; the first word (capitalised anyway) and punctuation come with False, and a
    punctuation token is returned as "". A possessive ends a name as punctuation does: "the
    School of Engineering's CFD licence" names the School of Engineering and CFD, which the
    corpus need not write side by side."""
    out: list[tuple[bool, str]] = []
    words = 0
    for m in _QTOKEN_RE.finditer(question):
        tok = m.group()
        if not tok[0].isalnum():
            out.append((False, ""))
            continue
        out.append((words > 0, tok))
        words += 1
        if _POSSESSIVE_RE.search(tok) or (tok[-1] in "sS" and question[m.end() : m.end() + 1] in ("'", "’")):
            out.append((False, ""))
    return out


# the joiner that may also join two names ("Carl Rogers and Person-centered therapy"); "&" is
# no token of the question here, so "Procter & Gamble" stays one name
_COORDINATORS = frozenset(["and"])


def _name_runs(question: str) -> list[list[list[str]]]:
    """The question's names as their capitalised words, each name cut where "and" joined its
    words (one piece when nothing did)."""
    names: list[list[list[str]]] = []
    run: list[list[str]] = []
    joined = False
    for may_name, tok in _question_tokens(question):
        if may_name and tok[:1].isupper():
            if not run:
                run = [[]]
            run[-1].append(tok)
            joined = False
            continue
        if run and tok.lower() in _NAME_JOINERS and not joined:
            joined = True
            if tok.lower() in _COORDINATORS:
                run.append([])
            continue
        if run:
            names.append(run)
        run, joined = [], False
    if run:
        names.append(run)
    return names


def question_names(question: str) -> list[tuple[str, ...]]:
    """The names a question mentions, each as its normalised words.

    A name is a run of capitalised words (joined by "of", "the", "van", ...), never starting
    at the question's first word, which is capitalised anyway, and ended by punctuation (a
    comma between two names, a closing quote) or a possessive; hyphenated parts count as words
    ("Jong-chul" -> jong, chul). Words of one letter (initials) and stopwords are dropped."""
    names = [_run_words(run) for run in _name_runs(question)]
    return [n for n in names if n]


def question_name_parts(question: str) -> dict[tuple[str, ...], list[tuple[str, ...]]]:
    """For each name of :func:`question_names` that joins names with "and", the names it
    joins, each as its normalised words."""
    out: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for run in _name_runs(question):
        whole = _run_words(run)
        parts = [p for p in (_name_words(piece) for piece in run) if p]
        if whole and len(parts) > 1:
            out[whole] = parts
    return out


def _run_words(run: list[list[str]]) -> tuple[str, ...]:
    """A whole name's words, the names it joins taken together."""
    return _name_words([t for piece in run for t in piece])


def _name_words(tokens: list[str]) -> tuple[str, ...]:
    words = [_norm(part) for tok in tokens for part in re.split(r"[.\-]", tok)]
    return tuple(dict.fromkeys(w for w in words if len(w) > 1))


def question_name_pairs(question: str) -> list[tuple[str, str]]:
    """Pairs of words that stand next to each other inside a name of the question (its
    capitalised words, not across a joiner such as "of"): the phrases a corpus that knows the
    name must contain. Initials and stopwords are skipped, so "Harris W. Fawell" gives
    (harri, fawell)."""
    pairs: list[tuple[str, str]] = []
    prev = ""
    for may_name, tok in _question_tokens(question):
        if not may_name or not tok[:1].isupper():
            prev = ""
            continue
        for part in re.split(r"[.\-]", tok):
            w = _norm(part)
            if len(w) < 2:
                continue
            if prev and prev != w:
                pairs.append((prev, w))
            prev = w
    return list(dict.fromkeys(pairs))


def _pair_key(a: str, b: str) -> int:
    """A pair of words as one 64-bit integer (a compact set of the corpus' word pairs).
    Python's own string hash: salted per process, which is fine for a lexicon that lives in
    the process that built it, and several times faster than a cryptographic digest."""
    return hash((a, b))


def word_pairs(text: str) -> set[int]:
    """Keys of the normalised word pairs of ``text`` that stand next to each other or one word
    apart (an initial or a joiner between: "Harris W. Fawell", "Siege of Cassel")."""
    tokens = _WORD_RE.findall(text)
    keys: set[int] = set()
    sequences = [tokens]
    if _CAMEL_RE.search(text):  # and with camel-case words as their parts ("PowerShell" -> power shell)
        sequences.append([p for t in tokens for p in _camel_parts(t)])
    for seq in sequences:
        words = [_norm(w) or "_" for w in seq]
        keys.update(_pair_key(a, b) for a, b in itertools.pairwise(words))
        keys.update(_pair_key(a, b) for a, b in zip(words, words[2:], strict=False))
    return keys


# Words that stand inside an acronym's expansion without giving it a letter ("Bank of England"
# -> BoE, "Food and Drug Administration" -> FDA), and the letters an acronym has.
_ACRONYM_JOINERS = frozenset(["of", "and", "for", "the", "on", "in", "to", "de", "&"])
_ACRONYM_LETTERS = range(2, 7)
# a question word written in capitals, optionally plural ("FAQ", "FAQs", "USA")
_ACRONYM_RE = re.compile(r"[A-Z]{2,6}s?")


# a heading is a short line; two or more capitalised words, joiners between, are a name
_HEADING_CHARS = 80
# (a candidate: a letter that is not ASCII lower case, e.g. "É"; the words are then checked)
_CAPITAL = r"[^\W\da-z_][\w'’]*"
_NAME_RUN_RE = re.compile(
    rf"{_CAPITAL}(?:\s+(?:(?:{'|'.join(map(re.escape, sorted(_ACRONYM_JOINERS)))})\s+)*{_CAPITAL})+")


def _initials(words: Sequence[str]) -> str:
    return "".join(_fold(w)[0].lower() for w in words if w.lower() not in _ACRONYM_JOINERS)


def spelled_acronyms(text: str) -> set[str]:
    """The acronyms ``text`` spells out, lower case: the initials of 2-6 words that stand
    together as a name (capitalised, joiners such as "of" between: "Full Disk Access" ->
    "fda", "Bank of England" -> "be") or as a whole line of their own (a title or heading in
    sentence case: "Frequently asked questions" -> "faq"). Only names and headings: the
    initials of any run of words would spell most short acronyms by chance."""
    out: set[str] = set()
    for line in text.splitlines():
        if len(line) <= _HEADING_CHARS:
            tokens = _WORD_RE.findall(line)
            words = [t for t in tokens if _norm(t) or t.lower() in _ACRONYM_JOINERS]
            if words and len(words) == len(tokens) and words[0][:1].isalpha():
                letters = _initials(words)
                if len(letters) in _ACRONYM_LETTERS:
                    out.add(letters)
    for m in _NAME_RUN_RE.finditer(text):
        run: list[str] = []  # capitalised words, and the joiners between them
        for w in [*_WORD_RE.findall(m.group(0)), ""]:
            if (w[:1].isupper() and _norm(w)) or (run and w.lower() in _ACRONYM_JOINERS):
                run.append(w)
                continue
            caps = [i for i, c in enumerate(run) if c[:1].isupper() and _norm(c)]
            for a, b in itertools.combinations(caps, 2):  # each stretch from one capitalised word to another
                letters = _initials(run[a : b + 1])
                if len(letters) in _ACRONYM_LETTERS:
                    out.add(letters)
            run = []
    return out


def question_acronyms(question: str) -> frozenset[str]:
    """The normalised words the question writes in capitals ("FAQ", "FAQs" -> "faq"): acronyms,
    which a corpus may spell out instead (:func:`spelled_acronyms`)."""
    return frozenset(_norm(tok) for may_name, tok in _question_tokens(question) if may_name and _ACRONYM_RE.fullmatch(tok))


# A word written as code: a command-line flag ("--fast"), a dotted or underscored identifier
# ("upload.timeout", "keep_hourly"), a URL scheme ("ftp://"); lower case only, so neither an
# abbreviation ("U.S.") nor a number ("98.7", a quantity the documents may give as a range).
_CODE_RE = re.compile(
    r"(?<![\w.-])(?:--?[a-z][a-z0-9-]*|[a-z0-9]*[a-z][a-z0-9]*(?:[._][a-z0-9]+)+|[a-z0-9]+(?:[._][a-z0-9]+)*[._][a-z][a-z0-9]*|[a-z][a-z0-9+.-]*://)(?!\w)")


_ABBREVIATION_RE = re.compile(r"(?:[a-z][._])+[a-z]")  # "e.g", "i.e", "a.m": letters, one each


def code_words(text: str) -> set[str]:
    """The words ``text`` writes as code (a sentence's full stop after one is not part of it)."""
    found = (m.group(0).rstrip(".") for m in _CODE_RE.finditer(text))
    return {c for c in found if not _ABBREVIATION_RE.fullmatch(c)}


# A configuration file shown in INI or TOML form: a "[section]" line, then "key = value" lines
_SECTION_RE = re.compile(r"\s*\[([a-z0-9_.-]+)\]\s*")
_KEY_RE = re.compile(r"\s*([a-z0-9_-]+)\s*[=:]")
_CONFIG_COMMENT = ("#", ";")


def written_codes(text: str) -> set[str]:
    """The words a corpus text writes as code (:func:`code_words`), and ``section.key`` for
    each key of a configuration it shows in INI or TOML form (a ``[section]`` line, then
    ``key = value`` lines): the dotted name a question may use for such a key."""
    out = code_words(text)
    if "[" not in text:
        return out
    section = None
    for line in text.splitlines():
        if m := _SECTION_RE.fullmatch(line):
            section = m.group(1)
        elif section and (m := _KEY_RE.match(line)):
            out.add(f"{section}.{m.group(1)}")
        elif line.strip() and not line.lstrip().startswith(_CONFIG_COMMENT):
            section = None  # the section's lines end at the first line that is not one of them
    return out


def close_spellings(word: str, vocabulary: Sequence[str]) -> list[str]:
    """The words of ``vocabulary`` spelled close to ``word`` (a word of 6+ letters, difflib
    ratio >= 0.85: a typo or transliteration, not another word), at most three."""
    if len(word) < 6:
        return []
    return difflib.get_close_matches(word, vocabulary, n=3, cutoff=0.85)


@dataclass(frozen=True)
class CorpusLexicon:
    """Which passages of the corpus hold which content terms: document frequencies for IDF
    weights and postings for "do these words occur together in one passage"."""

    passages: int
    postings: dict[str, np.ndarray]  # term -> sorted passage indexes
    vocabulary: tuple[str, ...]  # sorted, for spelling-variant lookups
    pairs: np.ndarray | None = None  # sorted keys of the corpus' word pairs (``word_pairs``)
    acronyms: frozenset[str] = frozenset()  # what the corpus spells out (``spelled_acronyms``)
    codes: frozenset[str] = frozenset()  # what the corpus writes as code (``written_codes``)

    @classmethod
    def build(cls, texts: Iterable[str], *, with_pairs: bool = False) -> CorpusLexicon:
        lists: dict[str, list[int]] = {}
        pairs: set[int] = set()
        acronyms: set[str] = set()
        codes: set[str] = set()
        n = 0
        for n, text in enumerate(texts, start=1):
            for term in lexicon_terms(text):
                lists.setdefault(term, []).append(n - 1)
            if with_pairs:
                pairs |= word_pairs(text)
            acronyms |= spelled_acronyms(text)
            codes |= written_codes(text)
        postings = {t: np.asarray(v, dtype=np.int32) for t, v in lists.items()}
        keys = np.unique(np.fromiter(pairs, dtype=np.int64, count=len(pairs))) if with_pairs else None
        return cls(n, postings, tuple(sorted(postings)), keys, frozenset(acronyms), frozenset(codes))

    def spells_out(self, acronym: str) -> bool:
        """True when some passage spells ``acronym`` out as a name or a heading."""
        return acronym in self.acronyms

    def uses(self, term: str) -> bool:
        return term in self.postings

    def writes(self, code: str) -> bool:
        """True when some passage writes ``code`` (:func:`written_codes`)."""
        return code in self.codes

    def has_pair(self, a: str, b: str) -> bool:
        """True when ``a`` and ``b`` stand next to each other (or one word apart) somewhere in
        the corpus, either way round; True when the lexicon was built without pairs."""
        if self.pairs is None:
            return True
        for key in (_pair_key(a, b), _pair_key(b, a)):
            i = int(np.searchsorted(self.pairs, key))
            if i < len(self.pairs) and int(self.pairs[i]) == key:
                return True
        return False

    def knows(self, word: str) -> bool:
        """True when the corpus uses ``word`` or a spelling variant of it."""
        return bool(self.variants(word))

    def idf(self, term: str) -> float:
        """BM25's IDF, log((N + 1) / (df + 0.5)): a term the corpus never uses weighs the most."""
        hits = self.postings.get(term)
        return math.log((self.passages + 1) / ((0 if hits is None else len(hits)) + 0.5))

    def variants(self, word: str) -> list[str]:
        """The word, or when the corpus lacks it, its :func:`close_spellings`."""
        return [word] if word in self.postings else close_spellings(word, self.vocabulary)

    def prepare(self, names: Iterable[Sequence[str]] = (), terms: Iterable[str] = (),
                pairs: Iterable[tuple[str, str]] = ()) -> None:
        """Nothing to do: the lexicon is in memory."""

    def has_together(self, words: Sequence[str]) -> bool:
        """True when one passage holds every word (or a spelling variant of it)."""
        common: np.ndarray | None = None
        for w in words:
            lists = [self.postings[v] for v in self.variants(w)]
            if not lists:
                return False
            hits = np.unique(np.concatenate(lists)) if len(lists) > 1 else lists[0]
            common = hits if common is None else np.intersect1d(common, hits, assume_unique=True)
            if not len(common):
                return False
        return True


def corpus_lexicon(store: GraphStore, group: str, *, with_pairs: bool = False) -> CorpusLexicon:
    """The group's lexicon over its chunks (each with its document title), built once per
    store version (with the word pairs when ``with_pairs``: a second cache entry)."""

    def build() -> CorpusLexicon:
        titles = document_titles(store, group)
        texts = (
            f"{titles.get(node.doc_id or '', '')}\n{node.props.get('text') or ''}"
            for node in store.iter_nodes(group, Label.CHUNK)
        )
        return CorpusLexicon.build(texts, with_pairs=with_pairs)

    key = "negative_detection.lexicon" + (".pairs" if with_pairs else "")
    return per_version(store, group, key, build)


class CorpusTerms(Protocol):
    """What negative detection asks of the corpus: a :class:`CorpusLexicon` held in the
    client, or :class:`StoreTerms` reading the store's full-text index per question."""

    def idf(self, term: str) -> float: ...

    def knows(self, word: str) -> bool: ...

    def has_together(self, words: Sequence[str]) -> bool: ...

    def has_pair(self, a: str, b: str) -> bool: ...

    def spells_out(self, acronym: str) -> bool: ...

    def uses(self, term: str) -> bool:
        """True when some chunk holds ``term`` (its document frequency is not 0)."""

    def writes(self, code: str) -> bool: ...

    def prepare(self, names: Iterable[Sequence[str]] = (), terms: Iterable[str] = (),
                pairs: Iterable[tuple[str, str]] = ()) -> None:
        """Make the look-ups that :meth:`has_together` (of each name's words), :meth:`idf`
        (of each term) and :meth:`has_pair` will ask for together, where that saves work."""


# Candidate chunks StoreTerms reads per look-up, best first by the index: a check holds as
# soon as one candidate passes it, and the index ranks the texts holding the exact words
# (and, for a pair, holding them close) first.
STORE_CANDIDATES = 50


class StoreTerms:
    """:class:`CorpusLexicon`'s answers through the store's full-text index of the chunks:
    the index finds candidate chunks (fuzzily, as it stems words and keeps accents), and the
    same word rules as the lexicon's decide on their texts, so nothing of the corpus stays
    in the client. A document frequency is exact while the index matches at most
    ``candidates`` chunks, else the index's count of the word's stem. One instance per
    question: it remembers its look-ups, nothing else; :meth:`prepare` makes a question's
    look-ups together, a few store round trips instead of one each."""

    def __init__(self, store: GraphStore, group: str, candidates: int = STORE_CANDIDATES) -> None:
        self.store, self.group, self.candidates = store, group, candidates
        self._passages: int | None = None
        self._variants: dict[str, list[str]] = {}
        self._df_of: dict[str, int] = {}
        self._matched: dict[TextMatch, list[str]] = {}
        self._counted: dict[str, int] = {}
        self._exact: set[str] = set()  # words an exact look-up found as the client spells them

    def _match(self, lookups: Sequence[TextMatch]) -> list[list[str]]:
        """The texts of each look-up, those not made before in one store call."""
        todo = list(dict.fromkeys(m for m in lookups if m not in self._matched))
        if todo:
            found = self.store.match_texts(self.group, todo) or [[] for _ in todo]
            self._matched.update(zip(todo, found, strict=True))
        return [self._matched[m] for m in lookups]

    def _count(self, words: Sequence[str]) -> list[int]:
        todo = list(dict.fromkeys(w for w in words if w not in self._counted))
        if todo:
            found = self.store.count_texts(self.group, todo) or [0] * len(todo)
            self._counted.update(zip(todo, found, strict=True))
        return [self._counted[w] for w in words]

    def _lookup(self, clauses: Sequence[Sequence[str]], near: Sequence[str] = ()) -> TextMatch:
        """A look-up of the candidates: fuzzy unless every word is one an exact look-up
        found (a fuzzy term costs the index far more on a large corpus)."""
        fuzzy = not all(w in self._exact for c in clauses for w in c)
        return TextMatch(tuple(tuple(c) for c in clauses), self.candidates, fuzzy, tuple(near))

    def _found_exactly(self, words: Sequence[str]) -> None:
        """Look ``words`` up as they are (one store call) and note those the index holds so."""
        exact = [TextMatch(((w,),), self.candidates) for w in words]
        for w, texts in zip(words, self._match(exact), strict=True):
            if any(w in lexicon_terms(t) for t in texts):
                self._exact.add(w)

    def _texts(self, clauses: Sequence[Sequence[str]], near: Sequence[str] = ()) -> list[str]:
        return self._match([self._lookup(clauses, near)])[0]

    def prepare(self, names: Iterable[Sequence[str]] = (), terms: Iterable[str] = (),
                pairs: Iterable[tuple[str, str]] = ()) -> None:
        """Look up together what the checks will ask, in three or four store calls: each
        name word as it is and each term's count; then the other spellings of the name words
        the index lacks, the texts holding all of a name's words, the rare terms' texts
        (their exact document frequencies) and the texts holding each pair; last, the texts
        holding the words of the names that needed other spellings."""
        names, terms = [list(n) for n in names], list(dict.fromkeys(terms))
        words = list(dict.fromkeys(w for n in names for w in n))
        self._found_exactly(words)
        counts = self._count(terms)
        missing = [self._lookup([[w]]) for w in words if w not in self._exact]  # fuzzy: other spellings
        known = [n for n in names if len(n) > 1 and all(w in self._exact for w in n)]
        rare = [TextMatch(((t,),), n) for t, n in zip(terms, counts, strict=True) if 0 < n <= self.candidates]
        self._match([*missing, *(self._lookup([[w] for w in n]) for n in known), *rare,
                     *(self._lookup([[a], [b]], near=[a, b]) for a, b in pairs)])
        rest = ([self.variants(w) for w in n] for n in names if len(n) > 1 and n not in known)
        self._match([self._lookup(o) for o in rest if all(o)])

    def variants(self, word: str) -> list[str]:
        """As :meth:`CorpusLexicon.variants`, over the candidates' words."""
        if word not in self._variants:
            self._found_exactly([word])
            if word in self._exact:
                self._variants[word] = [word]
            else:
                terms = frozenset().union(*(lexicon_terms(t) for t in self._texts([[word]])))
                self._variants[word] = [word] if word in terms else close_spellings(word, sorted(terms))
        return self._variants[word]

    def knows(self, word: str) -> bool:
        return bool(self.variants(word))

    def _df(self, word: str, term: str) -> int:
        """Chunks holding ``term``, found by ``word`` (the term, or its spelling in the index):
        counted exactly among the index's matches while they are few (a rare word weighs the
        most, so its count matters most), else the index's count of the word's stem."""
        n = self._count([word])[0]
        if not n or n > self.candidates:
            return n
        texts = self._match([TextMatch(((word,),), n)])[0]
        return sum(term in lexicon_terms(t) for t in texts)

    def _doc_freq(self, term: str) -> int:
        """Chunks holding ``term`` (:meth:`_df`), counted once per question."""
        if term not in self._df_of:
            df = self._df(term, term)
            if not df:  # the index may hold the word with its accents: count that spelling
                spelling = next((w for t in self._texts([[term]]) for w in _WORD_RE.findall(t) if _norm(w) == term), None)
                if spelling and spelling != term:
                    df = self._df(spelling, term)
            self._df_of[term] = df
        return self._df_of[term]

    def idf(self, term: str) -> float:
        if self._passages is None:  # counting a large group's chunks takes the server a while
            self._passages = counted_nodes(self.store, self.group, Label.CHUNK)
        return math.log((self._passages + 1) / (self._doc_freq(term) + 0.5))

    def has_together(self, words: Sequence[str]) -> bool:
        options = [self.variants(w) for w in words]
        if not all(options):
            return False
        if len(options) < 2:
            return True
        sets = [frozenset(o) for o in options]
        return any(all(terms & s for s in sets) for terms in map(lexicon_terms, self._texts(options)))

    def has_pair(self, a: str, b: str) -> bool:
        keys = {_pair_key(a, b), _pair_key(b, a)}
        return any(not keys.isdisjoint(word_pairs(t)) for t in self._texts([[a], [b]], near=[a, b]))

    def spells_out(self, acronym: str) -> bool:
        """False: the full-text index holds words, not the initials of names, so on a store
        read through it an acronym counts only as a word."""
        return False

    def uses(self, term: str) -> bool:
        return self._doc_freq(term) > 0

    def writes(self, code: str) -> bool:
        """Among the chunks the index finds for the code (its flag dashes and scheme's "://"
        left out; a dotted name's parts, for a configuration in INI or TOML form), one writes
        it (:func:`written_codes`)."""
        key = code.lstrip("-").removesuffix("://")
        if any(code in written_codes(t) for t in self._texts([[key]])):
            return True
        section, _, last = code.rpartition(".")
        return bool(section) and any(code in written_codes(t) for t in self._texts([[section], [last]]))


def corpus_terms(store: GraphStore, group: str, *, with_pairs: bool = False) -> CorpusTerms:
    """The group's corpus for negative detection: through the store's full-text index when
    it keeps one (:class:`StoreTerms`; nothing corpus-sized in the client), else the
    group's :class:`CorpusLexicon`, built once per store version (the embedded store: the
    process holds the data anyway)."""
    if store.match_text(group, (), 0) is not None:
        return StoreTerms(store, group)
    return corpus_lexicon(store, group, with_pairs=with_pairs)


_MODIFIER_POS = frozenset({"NOUN", "PROPN", "ADJ"})


def _wh_phrase_tokens(doc: Any) -> set[int]:
    """Indexes of the words right after "which" / "what" that name the kind of answer: the run
    of nouns and adjectives, and after "of" the next run ("what kind of plane"). Read by word
    order, not the parse: the small model attaches "which" to the preposition before it in
    "On which sea coast ...", so the noun it determines has no wh child."""
    out: set[int] = set()
    for tok in doc:
        if tok.lower_ not in ("which", "what"):
            continue
        i = tok.i + 1
        while i < len(doc):
            if doc[i].pos_ in _MODIFIER_POS:
                out.add(i)
            elif not (doc[i].lower_ == "of" and i > tok.i + 1 and i + 1 < len(doc) and doc[i + 1].pos_ in _MODIFIER_POS):
                break
            i += 1
    return out


def question_nouns(question: str) -> list[str]:
    """The nouns of what the question is about (spaCy's tagger and parser, the pipeline
    ``ner_seeds`` loads), normalised. Skipped: the nouns of the phrase a wh-word determines
    ("which year", "which sea coast", "what kind of plane": the kind of answer asked for,
    which the answering passage need not name: "founded in 1661", "the Baltic coast"), and a
    noun the parser makes the root (a question's root is its verb, so that tag is the
    tagger's mistake: "... does the change freeze begin?")."""
    from graphroute.plugins.seeds.entity_seeds import question_doc

    doc = question_doc(question, "always")
    answer_type = _wh_phrase_tokens(doc)
    out = []
    for tok in doc:
        if tok.pos_ not in ("NOUN", "PROPN") or tok.dep_ == "ROOT" or not tok.text.isalpha():
            continue
        if tok.i in answer_type:
            continue
        w = _norm(tok.text)
        if len(w) > 1:
            out.append(w)
    return list(dict.fromkeys(out))


@lru_cache(maxsize=256)
def _parsed(question: str) -> Any | None:
    """The question's spaCy ``Doc`` (tags, parse, entities; the pipeline ``ner_seeds`` loads),
    or None where spaCy or its English pipeline is not installed."""
    try:
        from graphroute.plugins.seeds.entity_seeds import question_doc

        return question_doc(question, "always")
    except (ImportError, OSError):
        return None


# Parts of speech of a question's own wording rather than of what it asks about
_WORDING_POS = frozenset({"VERB", "AUX", "ADV"})


def absent_wording(question: str, texts: Sequence[str], lexicon: CorpusTerms) -> frozenset[str]:
    """The question's verbs and adverbs (spaCy's tagger) that no chunk of the corpus uses and
    ``texts`` do not hold: how the question puts what the documents say in other words ("seems
    to have moved back" / "appears to have gone back", "how often ... replaced" / "refreshed
    every three years"). Empty without spaCy."""
    q = content_terms(question)
    seen = frozenset().union(*map(lexicon_terms, texts))
    unused = {w for w in q - seen if not lexicon.uses(w)}
    doc = _parsed(question) if unused else None
    if doc is None:
        return frozenset()
    return frozenset(unused & {_norm(t.text) for t in doc if t.pos_ in _WORDING_POS})


def name_describers(question: str) -> frozenset[str]:
    """Normalised words of the question that spaCy's NER marks as a nationality, religious or
    political group (NORP) on their own: before a name they describe it rather than belong to
    it ("a German Fachhochschule" is a Fachhochschule; the corpus may write it without the
    adjective). Part of a larger name ("the Dutch Reformed Church") they are not NORP."""
    doc = _parsed(question)
    if doc is None:
        return frozenset()
    return frozenset(w for e in doc.ents if e.label_ == "NORP" for t in e if (w := _norm(t.text)))


def name_found(name: Sequence[str], lexicon: CorpusTerms, spelled: Set[str], describers: Set[str]) -> bool:
    """Whether the corpus holds ``name`` (its words in one chunk), where a word in
    ``spelled`` (:func:`spelled_out`) needs no chunk, and a leading describer word
    (:func:`name_describers`) may stand apart from the rest."""
    words = [w for w in name if w not in spelled]
    if len(words) > 1 and words[0] in describers:
        return lexicon.has_together(words[:1]) and lexicon.has_together(words[1:])
    return not words or lexicon.has_together(words)


def spelled_out(question: str, lexicon: CorpusTerms) -> frozenset[str]:
    """The acronyms of the question that the corpus has only spelled out: "FAQ" in a corpus
    with a page "Frequently asked questions" and no word "FAQ" (:func:`spelled_acronyms`)."""
    return frozenset(w for w in question_acronyms(question) if lexicon.spells_out(w) and not lexicon.knows(w))


def missing_names(question: str, floor: NegativeFloor, lexicon: CorpusTerms,
                  names: Sequence[Sequence[str]], pairs: Sequence[tuple[str, str]],
                  parts: Mapping[tuple[str, ...], Sequence[Sequence[str]]] | None = None) -> list[str]:
    """The names (or, with ``name_phrases``, the word pairs of names) and the words written as
    code (:func:`code_words`) of the question that the corpus does not hold; a name of
    ``parts`` (:func:`question_name_parts`) is held when each name it joins is. The question
    is parsed (for :func:`name_describers`) only when a name or a pair is missing on its words
    alone."""
    absent_codes = [c for c in sorted(code_words(question)) if not lexicon.writes(c)]
    if absent_codes:
        return absent_codes
    spelled = spelled_out(question, lexicon)
    describers: frozenset[str] | None = None
    joined = parts or {}

    def found(n: Sequence[str], describe: frozenset[str]) -> bool:
        return name_found(n, lexicon, spelled, describe) or (
            tuple(n) in joined and all(name_found(p, lexicon, spelled, describe) for p in joined[tuple(n)])
        )

    missing = [n for n in names if not found(n, frozenset())]
    if missing:
        describers = name_describers(question)
        missing = [n for n in missing if not found(n, describers)]
        if missing:
            return [" ".join(n) for n in missing]
    if not floor.name_phrases:
        return []
    lost = [(a, b) for a, b in pairs if a not in spelled and b not in spelled and not lexicon.has_pair(a, b)]
    if lost:
        describers = name_describers(question) if describers is None else describers
        lost = [(a, b) for a, b in lost if a not in describers]
    return [f"{a} {b}" for a, b in lost]


def term_coverage(question: str, texts: Sequence[str], lexicon: CorpusTerms, skip: Set[str] = frozenset()) -> float:
    """IDF-weighted share of the question's content terms (but ``skip``) that occur in ``texts``."""
    q = content_terms(question) - skip
    if not q:
        return 1.0
    seen: set[str] = set()
    for t in texts:
        seen |= lexicon_terms(t)
    total = sum(lexicon.idf(w) for w in q)
    return sum(lexicon.idf(w) for w in q & seen) / total if total > 0 else 1.0


def negative_reason(
    question: str,
    evidence: Sequence[Evidence],
    floor: NegativeFloor,
    lexicon: Callable[[], CorpusTerms] | None = None,
) -> tuple[str | None, dict[str, Any]]:
    """Why the context cannot answer (None when it may), with the figures checked.

    ``lexicon`` gives the corpus lexicon the name and term-coverage checks read; it is called
    only when one of them is on."""
    info: dict[str, Any] = {}
    if not evidence:
        return "no_evidence", info
    if len(evidence) < floor.min_chunks:
        return "too_few_chunks", info
    best = max(e.score for e in evidence)
    info["best_score"] = round(best, 6)
    if floor.min_score is not None and best < floor.min_score:
        return "below_min_score", info
    if floor.min_query_overlap > 0:
        q = content_terms(question)
        overlap = max((query_overlap(q, e.text) for e in evidence), default=0.0)
        info["best_query_overlap"] = round(overlap, 4)
        if overlap < floor.min_query_overlap:
            return "below_min_query_overlap", info
    if floor.min_term_coverage > 0 and not content_terms(question):
        # "???", "the of and": nothing to cover, and whatever ranked first is no answer to it
        return "no_content_terms", info
    if floor.needs_lexicon() and lexicon is not None:
        lex = lexicon()
        names = question_names(question) if floor.names_in_corpus else []
        parts = question_name_parts(question) if floor.names_in_corpus and floor.coordinated_names else {}
        pairs = question_name_pairs(question) if floor.names_in_corpus and floor.name_phrases else []
        terms = sorted(content_terms(question)) if floor.min_term_coverage > 0 else []
        lex.prepare([*names, *(p for ps in parts.values() for p in ps)], terms, pairs)
        if floor.names_in_corpus:
            missing = missing_names(question, floor, lex, names, pairs, parts)
            if missing:
                info["names_not_in_corpus"] = missing
                return "name_not_in_corpus", info
        if floor.min_term_coverage > 0:
            texts = [e.text for e in evidence[: floor.coverage_blocks]]
            cov = term_coverage(question, texts, lex)
            if cov < floor.min_term_coverage and floor.skip_absent_wording:
                wording = absent_wording(question, texts, lex)
                if wording:
                    info["wording_not_in_corpus"] = sorted(wording)
                    cov = term_coverage(question, texts, lex, wording)
            info["term_coverage"] = round(cov, 4)
            if cov < floor.min_term_coverage:
                return "below_min_term_coverage", info
        # last: the only check that parses the question (spaCy)
        if floor.absent_nouns:
            absent = [w for w in question_nouns(question) if not lex.knows(w)]
            if absent:
                info["nouns_not_in_corpus"] = absent
                return "noun_not_in_corpus", info
    return None, info


def stage_lexicon(ctx: StageContext, floor: NegativeFloor) -> Callable[[], CorpusTerms]:
    """The corpus of the group a stage runs on (:func:`corpus_terms`; with word pairs when
    the floor checks name phrases), made on first call."""
    pairs = floor.names_in_corpus and floor.name_phrases
    return lambda: corpus_terms(ctx.services.store, ctx.group, with_pairs=pairs)


def answer_not_found(state: QueryState, ctx: StageContext, reason: str) -> None:
    state.answer = NOT_FOUND
    state.negative = True
    state.citations = []
    ctx.stats["negative"] = True
    ctx.stats["negative_reason"] = reason


def _already_negative(state: QueryState, ctx: StageContext) -> bool:
    if state.negative:
        ctx.stats["skipped"] = "negative already decided"
        ctx.stats["negative"] = True
        return True
    return False


class NegativeDetection(Stage):
    """Answer "not found" when context is empty or below the floor, before synthesis."""

    name = "negative_detection"
    kind = StageKind.DENOISER
    consumes = (Slot.CONTEXT,)
    produces = (Slot.CONTEXT,)

    class Params(NegativeFloor):
        pass

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        reason, info = negative_reason(state.question, state.context_evidence, self.params, stage_lexicon(ctx, self.params))
        ctx.stats.update(info)
        if reason is None:
            ctx.stats["negative"] = False
            return
        answer_not_found(state, ctx, reason)
        state.context = ""  # the synthesizer is given nothing


# ----------------------------------------------------------------------------- extractive


@dataclass
class _Candidate:
    block: int  # 1-based context block number
    start: int
    end: int
    text: str
    overlap: float
    score: float


def _citation(block: int, ev: Evidence, spans: list[tuple[int, int]]) -> Citation:
    """A citation for block ``block``, narrowed to the cited sentences when offsets are exact."""
    start = min(s for s, _ in spans)
    end = max(e for _, e in spans)
    exact = ev.char_offset is not None and not ev.metadata.get("text_stripped")
    return Citation(
        index=block,
        evidence_id=ev.id,
        document=ev.document,
        document_id=ev.document_id,
        section_path=ev.section_path,
        page=ev.page,
        boxes=cited_boxes(ev, start, end),
        char_offset=(ev.char_offset + start) if exact and ev.char_offset is not None else ev.char_offset,
        char_length=(end - start) if exact else ev.char_length,
        text=ev.text[start:end],
    )


def citations_for(evidence: Sequence[Evidence], blocks: Sequence[int]) -> list[Citation]:
    """Whole-block citations for the ``[n]`` markers ``blocks`` (1-based), in index order."""
    out = []
    for n in sorted(set(blocks)):
        if 1 <= n <= len(evidence):
            ev = evidence[n - 1]
            out.append(_citation(n, ev, [(0, len(ev.text))]))
    return out


class Extractive(Stage):
    """Offline answer: the best evidence sentences for the question, with [n] citations."""

    name = "extractive"
    kind = StageKind.SYNTHESIZER
    consumes = (Slot.CONTEXT,)
    produces = (Slot.ANSWER,)

    class Params(NegativeFloor):
        max_sentences: int = Field(3, ge=1, le=20, description="At most this many sentences in the answer.")
        min_relative: float = Field(
            0.6, ge=0.0, le=1.0,
            description="Further sentences must score at least this fraction of the best one.",
        )
        evidence_weight: float = Field(
            0.3, ge=0.0, le=10.0,
            description="Weight of the evidence's retrieval score (normalised by the best) "
            "added to the sentence's query-term overlap.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        if _already_negative(state, ctx):
            return
        evidence = state.context_evidence
        reason, info = negative_reason(state.question, evidence, self.params, stage_lexicon(ctx, self.params))
        ctx.stats.update(info)
        if reason is not None:
            answer_not_found(state, ctx, reason)
            return
        q = content_terms(state.question)
        top = max((e.score for e in evidence), default=0.0)
        cands: list[_Candidate] = []
        for n, ev in enumerate(evidence, start=1):
            norm = ev.score / top if top > 0 else 0.0
            for s, e in sentence_spans(ev.text):
                text = ev.text[s:e]
                ov = query_overlap(q, text)
                cands.append(_Candidate(n, s, e, text, ov, ov + self.params.evidence_weight * norm))
        if not cands:
            answer_not_found(state, ctx, "no_sentences")
            return
        # best first; ties: earlier block, earlier sentence (reading order)
        cands.sort(key=lambda c: (-c.score, c.block, c.start))
        best = cands[0]
        chosen = [best]
        for c in cands[1:]:
            if len(chosen) >= self.params.max_sentences:
                break
            if c.overlap <= 0 or c.score < self.params.min_relative * best.score:
                continue
            if any(c.text == o.text for o in chosen):
                continue
            chosen.append(c)
        # present in context order so the answer reads naturally
        chosen.sort(key=lambda c: (c.block, c.start))
        state.answer = " ".join(f"{c.text} [{c.block}]" for c in chosen)
        state.negative = False
        by_block: dict[int, list[tuple[int, int]]] = {}
        for c in chosen:
            by_block.setdefault(c.block, []).append((c.start, c.end))
        state.citations = [_citation(n, evidence[n - 1], spans) for n, spans in sorted(by_block.items())]
        ctx.stats.update(
            {
                "negative": False,
                "sentences_considered": len(cands),
                "sentences_used": len(chosen),
                "best_sentence_overlap": round(best.overlap, 4),
            }
        )


# ----------------------------------------------------------------------------- LLM synthesis

SYSTEM_PROMPT = (
    "You answer questions using only the numbered context passages.\n"
    "Reply with the answer only: a short phrase or one to three plain sentences. No headers, "
    "no preamble, no lists, no restating the question, no hedging.\n"
    "After each statement put the number of the passage it comes from in square brackets, "
    "e.g. [2] or [1][3]. Cite only passage numbers that exist.\n"
    f"If the passages do not contain the answer, reply exactly: {NOT_FOUND}"
)

_MARKER_RE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_MODEL_NOT_FOUND_RE = re.compile(
    r"^\W*(?:not found\b|no answer\b|unknown\W*$|i (?:do not|don't|cannot|can't) (?:know|find|answer)|"
    r"(?:the )?(?:provided |given )?(?:context|passages?|documents?) (?:does|do) not (?:contain|mention|"
    r"provide|say|include|state)|there is no (?:information|mention)|cannot be determined|not (?:stated|"
    r"mentioned|specified) in)",
    re.IGNORECASE,
)




BACKGROUND_HEADER = "Background (summaries of topics in the documents; not passages, do not cite):"


def build_messages(
    question: str, context: str, extra_instructions: str = "", background: Sequence[str] = ()
) -> list[dict[str, str]]:
    """The concise, extraction-style prompt (route2 §8.5: verbosity is prompt-driven), with
    an optional background section (community summaries, route5 §6.3) before the passages."""
    from graphroute.plugins.denoisers.context import strip_internal_tags

    system = SYSTEM_PROMPT + (f"\n{extra_instructions.strip()}" if extra_instructions.strip() else "")
    head = (BACKGROUND_HEADER + "\n" + "\n".join(f"- {b}" for b in background) + "\n\n") if background else ""
    user = f"{head}Context:\n{strip_internal_tags(context)}\n\nQuestion: {question.strip()}\nAnswer:"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def cited_blocks(answer: str, n_blocks: int) -> tuple[str, list[int], int]:
    """The answer with invalid markers removed, the cited block numbers, and how many
    invalid markers (numbers that are not context blocks) were dropped."""
    cited: list[int] = []
    invalid = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal invalid
        keep = []
        for part in m.group(1).split(","):
            n = int(part)
            if 1 <= n <= n_blocks:
                keep.append(n)
                cited.append(n)
            else:
                invalid += 1
        return "".join(f"[{n}]" for n in keep)

    cleaned = _MARKER_RE.sub(repl, answer)
    cleaned = re.sub(r"[ \t]+([.,;:])", r"\1", cleaned)
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip(), cited, invalid


def is_model_not_found(answer: str) -> bool:
    return bool(_MODEL_NOT_FOUND_RE.search(answer.strip()))


class LLMSynthesis(Stage):
    """Concise answer with [n] citations from an OpenAI-compatible LLM; never invents."""

    name = "llm_synthesis"
    kind = StageKind.SYNTHESIZER
    consumes = (Slot.CONTEXT,)
    produces = (Slot.ANSWER,)

    class Params(NegativeFloor, LLMStageParams):
        max_tokens: int = Field(512, ge=16, le=32000, description="Answer length limit in tokens.")
        temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (0: reproducible).")
        extra_instructions: str = Field("", description="Appended to the system prompt (domain hints).")
        fallback: Literal["error", "extractive"] = Field(
            "error",
            description="Without a configured LLM, or when the model cannot be reached after its retries: "
            "'error' fails (saying how to configure one); 'extractive' answers offline instead.",
        )
        community_summaries: int = Field(
            0, ge=0, le=20,
            description="Community summaries given to the model as background before the passages (route5 "
            "§6.3): the communities the thematic tier matched, else the ones nearest the question; 0: none.",
        )
        community_min_similarity: float = Field(
            0.2, ge=-1.0, le=1.0,
            description="Cosine a community needs when this stage looks them up itself (no thematic tier ran).",
        )
        community_summary_chars: int = Field(
            600, ge=0, le=4000, description="Characters of each community summary (0: titles only)."
        )

    params: Params

    def _background(self, state: QueryState, ctx: StageContext) -> list[str]:
        """The community summaries for the prompt: Route 5's thematic communities when that
        tier ran (no extra search), else the nearest ones."""
        p = self.params
        if not p.community_summaries:
            return []
        store = ctx.services.store
        ids = state.extras.get(THEMATIC_COMMUNITIES)
        if ids is None:
            ids = nearest_communities(
                store, state.group, ctx.query_vector(state.question), p.community_summaries, p.community_min_similarity
            )
        texts = community_texts(store, state.group, list(ids)[: p.community_summaries], p.community_summary_chars)
        ctx.stats["community_summaries"] = len(texts)
        return texts

    def _extractive(self, state: QueryState, ctx: StageContext) -> None:
        ctx.stats["fallback"] = "extractive"
        floor = {k: getattr(self.params, k) for k in NegativeFloor.model_fields}
        Extractive(Extractive.Params(**floor)).run(state, ctx)

    def run(self, state: QueryState, ctx: StageContext) -> None:
        if _already_negative(state, ctx):
            return
        p = self.params
        evidence = state.context_evidence
        reason, info = negative_reason(state.question, evidence, p, stage_lexicon(ctx, self.params))
        ctx.stats.update(info)
        if reason is not None:
            answer_not_found(state, ctx, reason)
            return
        llm = ctx.services.stage_llm(p.llm, p.llm_params)
        if llm is None:
            if p.fallback == "extractive":
                self._extractive(state, ctx)
                return
            raise LLMNotConfiguredError(
                "llm_synthesis needs an LLM: set GRAPHROUTE_LLM=openai (and GRAPHROUTE_LLM_PARAMS, "
                "see docs/models.md), give the stage `llm: openai` with `llm_params`, set "
                "`fallback: extractive`, or use the `extractive` synthesizer instead"
            )
        ctx.stats["model"] = getattr(getattr(llm, "params", None), "model", llm.name)
        ctx.stats["endpoint"] = str(getattr(llm, "endpoint", "") or "")
        messages = build_messages(state.question, state.context, p.extra_instructions, self._background(state, ctx))
        try:
            resp = llm.complete(messages, max_tokens=p.max_tokens, temperature=p.temperature)
        except RemoteCallError as exc:
            if p.fallback != "extractive":
                raise
            ctx.stats["llm_error"] = str(exc)[:300]
            self._extractive(state, ctx)
            return
        record_usage(ctx, resp)
        if resp.refusal:  # never invent: a declined question is answered "not found"
            ctx.stats["llm_refusal"] = resp.refusal[:200]
            answer_not_found(state, ctx, "model_refused")
            return
        raw = resp.text.strip()
        if not raw or is_model_not_found(raw):
            answer_not_found(state, ctx, "model_not_found" if raw else "empty_reply")
            return
        from graphroute.plugins.denoisers.context import strip_internal_tags

        answer, blocks, invalid = cited_blocks(strip_internal_tags(raw), len(evidence))
        state.answer = answer
        state.negative = False
        state.citations = citations_for(evidence, blocks)
        ctx.stats.update({"negative": False, "citations": len(state.citations), "invalid_citations": invalid})

    async def arun(self, state: QueryState, ctx: StageContext) -> None:
        """Network-bound: run in a worker thread so parallel branches keep going."""
        await asyncio.to_thread(self.run, state, ctx)


@hookimpl
def register_synthesizers() -> list[type[Stage]]:
    return [Extractive, LLMSynthesis]


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [NegativeDetection]
