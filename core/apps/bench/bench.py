"""The benchmark runner behind ``graphroute bench``, ``ab`` and ``ablate``.

One :class:`BenchRunner` indexes a dataset's corpus once (into a group named from the
corpus content hash, so a second run reuses it) and runs every question through route
*variants* - a route plus overrides - recording per question what the metrics need:

* the route's document ranking (``QueryResult.ranking``, before context truncation) mapped
  to corpus passages, for recall@k and the signal rank;
* the context (containment), the answer (EM/F1), the negative flag (negative pass);
* context tokens (the context stage's trace stat, else counted), chunks, latency.

Everything reads only :class:`~graphroute.core.api.models.QueryResult`, like the reference's
hand-run benchmarks read only the answer and ``retrieval_stats``. The verdict rule of A/B
and ablation lives here too (:class:`VerdictRule`), so both commands decide alike.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphroute.core.api.models import Label, QueryResult, content_hash
from graphroute.core.apps.bench import metrics as M
from graphroute.core.apps.bench.datasets import Dataset, Question, corpus_records
from graphroute.core.config.overrides import Overrides
from graphroute.core.config.route import ParallelSpec, load_route_file
from graphroute.core.config.settings import Settings
from graphroute.core.errors import RouteConfigError
from graphroute.core.index.pipeline import Indexer

if TYPE_CHECKING:
    from graphroute.core.config.resolve import ResolvedRoute

BENCH_META = "bench_corpus"  # group meta: {hash, profile, passages, seconds}
DEFAULT_BENCH_STORE = ".graphroute/bench"
RECALL_KS = (2, 5, 10)
# the untimed warm-up questions, asked by every variant before the first timed one: none is
# one of the bench's, so an LLM route's reply cache holds no measured question's answer
# before it is measured (its tokens and cost would read 0); a few, not one, so the code
# paths and store pages a variant touches are warm too, not only its models
WARMUP_QUESTIONS = (
    "Which documents describe the main subject of this collection?",
    "Who is responsible for the most important decisions described here?",
    "When did the main events mentioned in these documents take place?",
)

# metrics where larger is better (A/B deltas print an arrow by this)
HIGHER_IS_BETTER = {
    "recall@2": True, "recall@5": True, "recall@10": True, "signal_rank": False,
    "signal_rank1": True, "signal_found": True, "containment": True, "em": True, "f1": True,
    "negative_pass": True, "false_negative": False, "context_tokens_mean": False,
    "chunks_mean": False, "latency_ms_p50": False, "latency_ms_p95": False,
}


@dataclass
class Variant:
    """A route with overrides, under a label used in reports."""

    label: str
    route: str
    overrides: Overrides | None = None
    # the route as first resolved: a YAML edited while a bench runs does not change it mid-run
    resolved: Any = field(default=None, repr=False, compare=False)

    def describe(self) -> dict[str, Any]:
        ov = self.overrides
        out: dict[str, Any] = {"route": self.route}
        if ov is not None and not ov.is_empty():
            out["set"] = {f"{s}.{p}": v for (s, p), v in sorted(ov.params.items())}
            out["enabled"] = dict(sorted(ov.enabled.items()))
        return out


@dataclass
class VariantRun:
    """Per-question records and aggregate metrics of one variant."""

    variant: Variant
    metrics: dict[str, Any]
    per_question: list[dict[str, Any]]


@dataclass
class IndexInfo:
    group: str
    seconds: float  # time of the indexing run that built the group
    cached: bool  # True when this run skipped indexing
    profile: str
    documents: int = 0
    corpus_file: str = ""


# --------------------------------------------------------------------------- route ids


def route_stage_ids(route: str) -> set[str]:
    """Every id an override may name in a route (stages and parallel blocks)."""
    cfg = load_route_file(route)
    ids = set(cfg.stage_ids())
    ids.update(e.key for e in cfg.stages if isinstance(e, ParallelSpec))
    return ids


def overrides_for(route: str, ov: Overrides | None) -> tuple[Overrides | None, set[str]]:
    """The part of ``ov`` that names stages of ``route``, and the ids it does not have.

    ``bench --set`` applies to every route given; an id only some routes have is applied
    where it exists (the caller reports ids no route has)."""
    if ov is None or ov.is_empty():
        return ov, set()
    ids = route_stage_ids(route)
    params = {k: v for k, v in ov.params.items() if k[0] in ids}
    enabled = {k: v for k, v in ov.enabled.items() if k in ids}
    unknown = {k[0] for k in ov.params if k[0] not in ids} | {k for k in ov.enabled if k not in ids}
    return Overrides(params, enabled, ov.origin, ov.strict), unknown


# --------------------------------------------------------------------------- the runner


class BenchRunner:
    """Indexes one dataset into a bench store and runs route variants over its questions."""

    def __init__(
        self,
        dataset: Dataset,
        *,
        store: str = DEFAULT_BENCH_STORE,
        profile: str | None = None,
        settings: Settings | None = None,
        warmup: bool = True,
        on_question: Callable[[str, int, int], None] | None = None,
        records_file: Path | None = None,
    ) -> None:
        self.dataset = dataset
        self.store_location = store
        self.profile = profile
        self.settings = settings or Settings()
        self.settings.store = store
        self.warmup = warmup
        self.on_question = on_question
        # each scored question is appended here as a JSON line ({"route": label, ...}, the
        # shape of bench --json's per_question) as soon as it is scored
        self.records_file = records_file
        suffix = "" if profile in (None, "default") else "-" + content_hash(str(profile))[:8]
        self.group = f"bench-{dataset.corpus_hash[:16]}{suffix}"
        self.settings.group = self.group
        self._gr: Any = None
        self._doc_map: dict[str, int] | None = None
        self.index_info: IndexInfo | None = None

    # ------------------------------------------------------------------ engine and index
    @property
    def engine(self) -> Any:
        if self._gr is None:
            from graphroute.core.engine import GraphRoute

            self._gr = GraphRoute(settings=self.settings)
        return self._gr

    def corpus_file(self) -> Path:
        """The corpus as one JSON file at a stable path (the loader names documents
        ``path#i``, so a stable path keeps re-runs incremental)."""
        d = Path(self.settings.cache_dir) / "bench"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"corpus-{self.dataset.corpus_hash[:16]}.json"
        if not path.is_file():
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(corpus_records(self.dataset.corpus), ensure_ascii=False), encoding="utf-8")
            tmp.replace(path)
        return path.resolve()

    def profile_fingerprint(self) -> str:
        """Hash of the resolved index profile: an edited profile re-runs the (incremental)
        indexer instead of benchmarking a stale index."""
        from graphroute.core.config.index_profile import load_index_profile

        return content_hash(load_index_profile(self.profile).model_dump_json(by_alias=True))

    def _indexer(self) -> Indexer:
        """The indexer of the bench group: whether the group is current is the indexer's
        call (its embedder may read documents otherwise than when the group was built)."""
        gr = self.engine
        return Indexer(gr.store, self.group, registry=gr.registry, settings=gr.settings, profile=self.profile)

    def prepare(self, force: bool = False) -> IndexInfo:
        """Index the corpus unless the group already holds it (same hash and profile)."""
        if self.index_info is not None and not force:
            return self.index_info
        gr = self.engine
        store = gr.store
        path = self.corpus_file()
        profile = self.profile or "default"
        fingerprint = self.profile_fingerprint()
        meta = store.get_meta(self.group, BENCH_META)
        has_nodes = bool(store.counts(self.group).get("nodes"))
        if (
            not force
            and isinstance(meta, dict)
            and meta.get("hash") == self.dataset.corpus_hash
            and meta.get("profile") == profile
            and meta.get("profile_fingerprint") == fingerprint
            and has_nodes
            and self._indexer().is_current()
        ):
            info = IndexInfo(self.group, float(meta.get("seconds", 0.0)), True, profile,
                             int(meta.get("documents", 0)), str(path))
        else:
            t0 = time.perf_counter()
            report = gr.index([path], group=self.group, profile=self.profile)
            seconds = time.perf_counter() - t0
            data = report.to_json() if hasattr(report, "to_json") else dict(report)
            if data.get("failed"):
                raise RuntimeError(f"indexing the bench corpus failed: {data['failed']}")
            documents = int(data.get("documents", 0))
            store.set_meta(self.group, BENCH_META, {
                "hash": self.dataset.corpus_hash, "profile": profile, "passages": len(self.dataset.corpus),
                "seconds": round(seconds, 3), "documents": documents, "profile_fingerprint": fingerprint,
            })
            info = IndexInfo(self.group, seconds, False, profile, documents, str(path))
        self.index_info = info
        self._doc_map = None
        return info

    # ------------------------------------------------------------------ passages
    def doc_map(self) -> dict[str, int]:
        """Store document id -> corpus index.

        The JSON loader names each entry's source ``<file>#<i>``; documents indexed from
        elsewhere fall back to their content hash of ``title\\ntext``."""
        if self._doc_map is not None:
            return self._doc_map
        info = self.prepare()
        prefix = info.corpus_file + "#"
        by_hash = {content_hash(f"{p.title}\n{p.text}"): i for i, p in enumerate(self.dataset.corpus)}
        out: dict[str, int] = {}
        for node in self.engine.store.iter_nodes(self.group, Label.DOCUMENT):
            source = str(node.props.get("source") or "")
            idx: int | None = None
            if source.startswith(prefix) and source[len(prefix):].isdigit():
                idx = int(source[len(prefix):])
            if idx is None or idx >= len(self.dataset.corpus):
                idx = by_hash.get(str(node.props.get("content_hash") or ""))
            if idx is not None:
                out[node.id] = idx
        self._doc_map = out
        return out

    def passages(self, result: QueryResult) -> list[int]:
        """The route's ranked corpus passages, best first, deduplicated."""
        return ranked_passages(result, self.doc_map(), self.engine.store, self.group)

    # ------------------------------------------------------------------ running
    def resolve(self, variant: Variant) -> Any:
        """The variant's route, read and checked once (commands resolve every variant before
        the first question, so a bad or edited route file is caught or ignored up front)."""
        if variant.resolved is None:
            variant.resolved = self.engine.route(variant.route, variant.overrides)
        return variant.resolved

    def run_variant(self, variant: Variant, *, progress: bool = True) -> VariantRun:
        return self.run_variants([variant], progress=progress)[0]

    def run_variants(self, variants: Sequence[Variant], *, progress: bool = True) -> list[VariantRun]:
        """Every question through every variant, one :class:`VariantRun` per variant.

        All variants are warmed up (:data:`WARMUP_QUESTIONS`, untimed) before the first timed
        question, then run question by question, the variant that goes first rotating (A B,
        B A, A B, ...): whatever runs first pays for cold caches, models loading and a
        machine that changes speed as the run goes on, so running all of A before all of B
        made B look faster with nothing changed. Records and quality figures do not depend
        on the order; only latency does."""
        from graphroute.core.lib.progress import track
        from graphroute.core.query.runner import run_route

        info = self.prepare()
        resolved = [self.resolve(v) for v in variants]
        services = self.engine.services(self.group)
        questions = self.dataset.questions
        if self.warmup and questions:  # load models and warm caches outside the timed runs
            for route in resolved:
                for warm in WARMUP_QUESTIONS:
                    run_route(route, warm, services)
        records: list[list[dict[str, Any]]] = [[] for _ in variants]
        label = " vs ".join(v.label for v in variants)
        items = track(questions, label, total=len(questions)) if progress else iter(questions)
        for n, q in enumerate(items, start=1):
            first = (n - 1) % len(variants)
            for j in (*range(first, len(variants)), *range(first)):
                services.clear_query_cache()  # each route pays for its own question embedding
                result = run_route(resolved[j], q.question, services)
                records[j].append(self.score(q, result))
                if self.records_file is not None:
                    with self.records_file.open("a", encoding="utf-8") as fh:
                        fh.write(json.dumps({"route": variants[j].label, **records[j][-1]}, ensure_ascii=False) + "\n")
                if self.on_question is not None:
                    self.on_question(variants[j].label, n, len(questions))
        runs = []
        for v, recs in zip(variants, records, strict=True):
            agg = aggregate(recs)
            agg["index_seconds"] = round(info.seconds, 3)
            runs.append(VariantRun(v, agg, recs))
        return runs

    def score(self, q: Any, result: QueryResult) -> dict[str, Any]:
        return score_record(q, result, self.passages(result))

    def close(self) -> None:
        if self._gr is not None:
            self._gr.close()
            self._gr = None


def ranked_passages(result: QueryResult, doc_map: dict[str, int], store: Any, group: str) -> list[int]:
    """The route's ranked passages (``doc_map``: store document id -> passage index), best
    first, deduplicated; evidence ids without a document id count for their owner's."""
    keys = result.ranking or M.dedupe(e.document_id or e.id for e in result.evidence)
    unknown = [k for k in keys if k not in doc_map]
    owner: dict[str, str] = {}
    if unknown:  # evidence ids (sentences, chunks) without a document id
        for node in store.get_nodes(group, unknown):
            if node.doc_id:
                owner[node.id] = node.doc_id
    ranked: list[int] = []
    for k in keys:
        idx = doc_map.get(k)
        if idx is None and k in owner:
            idx = doc_map.get(owner[k])
        if idx is not None and idx not in ranked:
            ranked.append(idx)
    return ranked


def score_record(q: Question, result: QueryResult, ranked: Sequence[int]) -> dict[str, Any]:
    """One question's record for :func:`aggregate`: recall@k and signal rank over the
    ranked passages, containment, EM/F1, the negative flag, tokens, chunks, latency."""
    rank = M.first_gold_rank(ranked, q.gold)
    rec: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "answerable": q.answerable,
        "gold": list(q.gold),
        "ranked": list(ranked[:10]),
    }
    for k in RECALL_KS:
        rec[f"recall@{k}"] = M.recall_at_k(ranked, q.gold, k)
    rec["signal_rank"] = rank
    answers = q.answers
    # an answerable question answered "not found" lost its answer, whatever the context held
    contained = not result.negative and M.contains_answer(result.context, answers)
    rec["containment"] = contained if answers and q.answerable else None
    rec["em"] = M.exact_match(result.answer, answers) if answers and q.answerable else None
    rec["f1"] = M.f1_score(result.answer, answers) if answers and q.answerable else None
    rec["negative"] = result.negative
    rec["negative_pass"] = None if q.answerable else float(result.negative)
    rec["answer"] = result.answer
    rec["context_tokens"] = context_tokens(result)
    rec["chunks"] = len(result.evidence)
    rec["latency_ms"] = round(result.duration_ms, 3)
    rec.update(llm_usage(result))
    return rec


def context_tokens(result: QueryResult) -> int:
    """Tokens of the synthesizer's context: the context stage's own count when its trace
    reports one (``context_tokens``), else the shared approximate counter."""
    for t in reversed(result.trace):
        v = t.stats.get("context_tokens") if t.enabled else None
        if isinstance(v, int | float):
            return int(v)
    return M.count_tokens(result.context)


def _r(value: float | None, nd: int = 4) -> float | None:
    return None if value is None else round(value, nd)


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-variant metrics from per-question records (see docs/benchmarking.md)."""
    with_gold = [r for r in records if r["gold"] and r["answerable"]]  # recall: answerable questions only
    ranks = [r["signal_rank"] for r in with_gold]
    found = [x for x in ranks if x is not None]
    latencies = [float(r["latency_ms"]) for r in records]
    negatives = [bool(r["negative"]) for r in records]
    answerable = [bool(r["answerable"]) for r in records]
    out: dict[str, Any] = {"questions": len(records), "answerable": sum(answerable),
                           "unanswerable": len(records) - sum(answerable)}
    for k in RECALL_KS:
        out[f"recall@{k}"] = _r(M.mean(r[f"recall@{k}"] for r in with_gold))
    out["signal_rank"] = _r(M.mean(found), 3)
    out["signal_rank1"] = _r(sum(1 for x in found if x == 1) / len(with_gold)) if with_gold else None
    out["signal_found"] = _r(len(found) / len(with_gold)) if with_gold else None
    for key in ("containment", "em", "f1"):
        out[key] = _r(M.mean(None if r[key] is None else float(r[key]) for r in records))
    out["negative_pass"] = _r(M.negative_pass(negatives, answerable))
    out["false_negative"] = _r(M.false_negative_rate(negatives, answerable))
    out["context_tokens_mean"] = _r(M.mean(float(r["context_tokens"]) for r in records), 1)
    out["chunks_mean"] = _r(M.mean(float(r["chunks"]) for r in records), 2)
    out["latency_ms_p50"] = _r(M.percentile(latencies, 50), 1)
    out["latency_ms_p95"] = _r(M.percentile(latencies, 95), 1)
    out.update(llm_metrics(records))
    return out


# --------------------------------------------------------------------------- LLM answers

# per variant; cost per 1,000 questions reads better than a mean of a fraction of a cent
LLM_METRICS = ("llm_calls_mean", "llm_tokens_mean", "llm_usd_per_1k_questions", "llm_cost_usd_total")


def llm_usage(result: QueryResult) -> dict[str, Any]:
    """What one question's model calls cost, summed over the route's stages (NER,
    classification, synthesis, reranking: whatever recorded tokens or cost in its trace),
    and, when the route's answer came from an LLM synthesizer, its model and endpoint.
    Empty for a route that called no model."""
    prompt = completion = calls = 0
    cost = 0.0
    for t in result.trace:
        if not t.enabled:
            continue
        prompt += int(t.tokens.get("prompt", 0))
        completion += int(t.tokens.get("completion", 0))
        cost += float(t.stats.get("cost_usd", 0.0) or 0.0)
        calls += int(t.stats.get("llm_calls", 0) or 0)
    synth = next((t for t in reversed(result.trace) if t.enabled and t.kind == "synthesizer"), None)
    model = synth.stats.get("model") if synth is not None else None
    if not (prompt or completion or cost or calls or model):
        return {}
    out: dict[str, Any] = {
        "llm_calls": calls, "llm_prompt_tokens": prompt, "llm_completion_tokens": completion,
        "llm_cost_usd": round(cost, 6),
    }
    if model:
        endpoint = synth.stats.get("endpoint") if synth is not None else None
        out["llm_model"] = f"{model} at {endpoint}" if endpoint else str(model)
    return out


def llm_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-variant LLM figures: model replies and tokens per question (means over all
    questions), the cost of 1,000 such questions and the total cost; the model(s) that
    answered. Empty when no question of
    the variant called a model. EM and F1 of the answers are the general ``em`` / ``f1``."""
    used = [r for r in records if "llm_calls" in r]
    if not used:
        return {}
    n = len(records)
    tokens = sum(int(r["llm_prompt_tokens"]) + int(r["llm_completion_tokens"]) for r in used)
    cost = sum(float(r["llm_cost_usd"]) for r in used)
    models = sorted({str(r["llm_model"]) for r in used if r.get("llm_model")})
    return {
        "llm_calls_mean": _r(sum(int(r["llm_calls"]) for r in used) / n, 2),
        "llm_tokens_mean": _r(tokens / n, 1),
        "llm_usd_per_1k_questions": _r(1000.0 * cost / n, 4),
        "llm_cost_usd_total": _r(cost, 6),
        "llm_model": "; ".join(models) if models else None,
    }


RETRIEVAL_METRICS = ("recall@2", "recall@5", "recall@10", "signal_rank", "signal_rank1", "signal_found",
                     "containment", "context_tokens_mean", "chunks_mean")


# --------------------------------------------------------------------------- bench


def bench_json(runner: BenchRunner, runs: Sequence[VariantRun]) -> dict[str, Any]:
    """The ``bench --json`` document."""
    info = runner.prepare()
    dataset = runner.dataset.describe()
    dataset.update(group=info.group, store=runner.store_location, index_profile=info.profile,
                   index_seconds=round(info.seconds, 3), index_cached=info.cached, documents=info.documents)
    per_question = [{"route": run.variant.label, **rec} for run in runs for rec in run.per_question]
    return {
        "routes": {run.variant.label: run.metrics for run in runs},
        "variants": {run.variant.label: run.variant.describe() for run in runs},
        "dataset": dataset,
        "per_question": per_question,
    }


# --------------------------------------------------------------------------- A/B


VERDICTS = ("KEEP", "REVERT", "SAME")


@dataclass
class VerdictRule:
    """KEEP B over A when nothing that matters regressed and something improved; SAME when
    nothing moved; REVERT otherwise.

    Guards (all must hold): recall@5 and containment drop by at most ``tolerance``, negative
    pass does not drop, false negatives (answerable questions answered "not found") rise by
    at most ``tolerance``, F1 drops by at most ``f1_tolerance``. Gains (at least one for
    KEEP): F1 rises by at least ``min_f1_gain``; recall@5, containment or negative pass rise
    by more than ``tolerance``; context tokens fall by at least ``min_token_cut``; p50
    latency falls by at least ``min_speed_gain`` (a speed gain at equal quality). Without a
    gain, B is REVERTed when it costs more (tokens or p50 latency up by those same shares)
    and is the SAME quality otherwise. The reference's sequential experiment read this way:
    a stage that cut tokens 8-27% at flat F1 was kept, one that lost containment or added
    tokens without recovering anything was reverted.

    Latency is the one noisy figure (quality and tokens repeat exactly), so a p50 change
    counts, as a gain or a cost, only when the run itself tells it apart from noise: the
    per-question latencies of A and B, measured in pairs, must differ in the same direction
    on more questions than a two-sided sign test puts down to chance at ``latency_alpha``
    (:func:`~graphroute.core.apps.bench.metrics.sign_test`; at 30 questions, 21 of them).
    The threshold thus comes from the run (how many questions, how consistently one side is
    faster), not from a constant tuned to one machine; fewer than 6 questions can never show
    it, and without per-question latencies latency does not count."""

    tolerance: float = 0.01
    f1_tolerance: float = 0.01
    min_f1_gain: float = 0.005
    min_token_cut: float = 0.05
    min_speed_gain: float = 0.10
    latency_alpha: float = 0.05

    def describe(self) -> str:
        return (
            f"KEEP when recall@5 and containment drop by <= {self.tolerance}, negative_pass does not drop, "
            f"false_negative rises by <= {self.tolerance} and f1 drops by <= {self.f1_tolerance}, AND f1 rises "
            f"by >= {self.min_f1_gain} or recall@5, containment or negative_pass rise by > {self.tolerance} or "
            f"context tokens fall by >= {self.min_token_cut:.0%} or p50 latency falls by >= {self.min_speed_gain:.0%}; "
            f"without a gain REVERT when tokens or p50 latency rise by those shares, else SAME (same quality); "
            f"a latency change counts only when B is faster (slower) on more questions than a paired sign test "
            f"puts down to chance at p <= {self.latency_alpha}"
        )

    def latency_change(
        self, a: dict[str, Any], b: dict[str, Any], latencies: tuple[Sequence[float], Sequence[float]] | None
    ) -> tuple[float | None, str | None]:
        """(relative p50 change of B, why it does not count): the change when it reaches
        ``min_speed_gain`` and the paired per-question ``latencies`` (A's, B's) tell it
        apart from noise; else (None, the reason, or None when p50 barely moved)."""
        va, vb = a.get("latency_ms_p50"), b.get("latency_ms_p50")
        if not va or vb is None:
            return None, None
        r = (float(vb) - float(va)) / float(va)
        if abs(r) < self.min_speed_gain:
            return None, None
        if not latencies:
            return None, f"p50 latency {r:+.1%} not counted: no per-question latencies to tell it from noise"
        faster, slower, p = M.sign_test(*latencies)
        if p > self.latency_alpha:
            return None, (f"p50 latency {r:+.1%} is within noise: B faster on {faster}, slower on {slower} of "
                          f"{len(latencies[0])} questions, sign test p={p:.2f} > {self.latency_alpha}")
        if (faster > slower) != (r < 0):  # p50 and most questions disagree: no clear direction
            return None, f"p50 latency {r:+.1%} but B is faster on {faster} and slower on {slower} questions: not counted"
        return r, None

    def decide(
        self, a: dict[str, Any], b: dict[str, Any],
        latencies: tuple[Sequence[float], Sequence[float]] | None = None,
    ) -> tuple[str, list[str]]:
        """("KEEP" | "REVERT" | "SAME", reasons). ``latencies``: A's and B's per-question
        latencies, in the same question order (see :meth:`latency_change`)."""

        def d(key: str) -> float:
            va, vb = a.get(key), b.get(key)
            return 0.0 if va is None or vb is None else float(vb) - float(va)

        reasons: list[str] = []
        for key, limit in (("recall@5", self.tolerance), ("containment", self.tolerance),
                           ("negative_pass", 1e-9), ("f1", self.f1_tolerance)):
            if d(key) < -limit:
                reasons.append(f"{key} dropped {d(key):+.4f}")
        if d("false_negative") > self.tolerance:
            reasons.append(f"false_negative rose {d('false_negative'):+.4f}")
        if reasons:
            return "REVERT", reasons
        gains: list[str] = []
        if d("f1") >= self.min_f1_gain:
            gains.append(f"f1 {d('f1'):+.4f}")
        for key in ("recall@5", "containment", "negative_pass"):
            if d(key) > self.tolerance:
                gains.append(f"{key} {d(key):+.4f}")
        costs: list[str] = []
        ta, tb = a.get("context_tokens_mean"), b.get("context_tokens_mean")
        tokens = None if not ta or tb is None else (float(tb) - float(ta)) / float(ta)
        latency, noise = self.latency_change(a, b, latencies)
        for name, r, share in (("tokens", tokens, self.min_token_cut), ("p50 latency", latency, self.min_speed_gain)):
            if r is not None and r <= -share:
                gains.append(f"{name} {r:+.1%}")
            elif r is not None and r >= share:
                costs.append(f"{name} {r:+.1%}")
        notes = [noise] if noise else []
        if gains:
            return "KEEP", gains + [f"(cost: {c})" for c in costs] + notes
        if costs:
            return "REVERT", [f"no gain, {c}" for c in costs] + notes
        return "SAME", ["same quality: no metric moved beyond its threshold", *notes]


def _wlt(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], key: str, eps: float = 1e-9) -> dict[str, Any]:
    wins = losses = ties = 0
    moved: list[dict[str, Any]] = []
    for ra, rb in zip(a, b, strict=True):
        va, vb = ra.get(key), rb.get(key)
        if va is None or vb is None:
            continue
        delta = float(vb) - float(va)
        if delta > eps:
            wins += 1
        elif delta < -eps:
            losses += 1
        else:
            ties += 1
            continue
        moved.append({"id": ra["id"], "a": va, "b": vb, "delta": round(delta, 4)})
    moved.sort(key=lambda m: (m["delta"], m["id"]))
    return {"wins": wins, "losses": losses, "ties": ties, "changed": moved}


PER_QUESTION_KEYS = ("f1", "recall@5", "containment", "negative_pass")


def per_question_wlt(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Wins/losses/ties of B against A, per question, on each of :data:`PER_QUESTION_KEYS`
    (``negative_pass`` counts unanswerable questions only)."""
    return {key: _wlt(a, b, key) for key in PER_QUESTION_KEYS}


def paired_latencies(a: VariantRun, b: VariantRun) -> tuple[list[float], list[float]]:
    """A's and B's per-question latencies, question for question (the verdict's noise test)."""
    return [float(r["latency_ms"]) for r in a.per_question], [float(r["latency_ms"]) for r in b.per_question]


def compare(a: VariantRun, b: VariantRun, rule: VerdictRule | None = None) -> dict[str, Any]:
    """Per-question wins/losses/ties (B vs A), metric deltas, verdict."""
    rule = rule or VerdictRule()
    deltas: dict[str, float | None] = {}
    for key, va in a.metrics.items():
        vb = b.metrics.get(key)
        if isinstance(va, int | float) and isinstance(vb, int | float) and not isinstance(va, bool):
            deltas[key] = round(float(vb) - float(va), 4)
        else:
            deltas[key] = None
    verdict, reasons = rule.decide(a.metrics, b.metrics, paired_latencies(a, b))
    return {
        "a": {"label": a.variant.label, **a.variant.describe(), "metrics": a.metrics},
        "b": {"label": b.variant.label, **b.variant.describe(), "metrics": b.metrics},
        "deltas": deltas,
        "per_question": per_question_wlt(a.per_question, b.per_question),
        "verdict": verdict,
        "reasons": reasons,
        "rule": rule.describe(),
    }


SAME_CONFIGURATION = "B resolves to the same configuration as A: nothing to compare, so B is not run"


def same_configuration(runner: BenchRunner, a: Variant, b: Variant) -> bool:
    """True when ``b`` runs exactly what ``a`` runs (:meth:`ResolvedRoute.effective`)."""
    return bool(runner.resolve(a).effective() == runner.resolve(b).effective())


def run_ab(runner: BenchRunner, a: Variant, b: Variant, rule: VerdictRule | None = None, *,
           progress: bool = True) -> dict[str, Any]:
    """:func:`compare` of A and B, run side by side (:meth:`BenchRunner.run_variants`).

    When B runs exactly what A runs (:meth:`ResolvedRoute.effective`: a route against
    itself, an override of a disabled stage), only A is run and the verdict is SAME: a
    second run could only measure noise."""
    if same_configuration(runner, a, b):
        run = runner.run_variant(a, progress=progress)
        cmp = compare(run, VariantRun(b, run.metrics, run.per_question), rule)
        cmp.update(verdict="SAME", reasons=[SAME_CONFIGURATION], same_configuration=True)
        return cmp
    run_a, run_b = runner.run_variants([a, b], progress=progress)
    cmp = compare(run_a, run_b, rule)
    cmp["same_configuration"] = False
    return cmp


# --------------------------------------------------------------------------- ablation


def ablation_plan(
    runner: BenchRunner, route: str, base: Overrides | None, stages: Sequence[str] = ()
) -> tuple[list[str], list[str], dict[str, bool]]:
    """(toggleable stage ids in route order, ids that cannot be switched off, whether each id
    is on in the route as given).

    The toggleable stages are the route's denoisers, or the ``stages`` named (any kind: a
    seed tier, a parallel branch's retriever, a parallel block), in route order. One is required when
    switching it off, together with the ones already off, makes the route invalid - e.g.
    ``token_budget`` produces the context a synthesizer consumes. Required stages stay on in
    every step."""
    from graphroute.core.config.resolve import load_route

    registry = runner.engine.registry
    resolved = load_route(route, registry, overrides=base)
    switches = resolved.switches()
    if stages:
        ids = list(switches)
        unknown = [sid for sid in stages if sid not in ids]
        if unknown:
            raise RouteConfigError(f"route {route} has no stage {', '.join(unknown)}", fix=f"its stage ids: {', '.join(ids)}")
        toggles = [sid for sid in ids if sid in stages]
    else:
        toggles = resolved.toggleable()
    off: list[str] = []
    required: list[str] = []
    for sid in toggles:
        trial = _with_toggles(base, {**dict.fromkeys(off, False), sid: False})
        try:
            load_route(route, registry, overrides=trial)
        except RouteConfigError:
            required.append(sid)
            continue
        off.append(sid)
    return toggles, required, switches


def _idle_reason(resolved: ResolvedRoute, sid: str) -> str:
    """Why switching ``sid`` on changed nothing in ``resolved``."""
    block = resolved.disabled_block(sid)
    return f"its parallel block {block} is disabled" if block else "the same stages run with the same parameters either way"


def _with_toggles(base: Overrides | None, toggles: dict[str, bool]) -> Overrides:
    b = base or Overrides(origin="command line")
    return Overrides(dict(b.params), {**b.enabled, **toggles}, b.origin, b.strict)


def ablate(
    runner: BenchRunner,
    route: str,
    *,
    base: Overrides | None = None,
    rule: VerdictRule | None = None,
    stages: Sequence[str] = (),
    progress: bool = True,
    plan: tuple[list[str], list[str], dict[str, bool]] | None = None,
) -> dict[str, Any]:
    """The reference's sequential experiment: every toggleable stage (the denoisers, or the
    ``stages`` named) off, then each one enabled in route order, measured, KEEP, REVERT or
    SAME against the current kept state; only a KEEP stays on for the steps after it (a SAME
    stage buys nothing measurable).

    Each step runs the current state again beside the trial (:meth:`BenchRunner.run_variants`),
    so both latencies come from the same stretch of the run: comparing with the current
    state's earlier run read every step as faster while the machine warmed up. A step whose
    trial runs exactly what the current state runs (the stage sits in a disabled parallel
    block, say) is not run: it is SAME, with the reason. ``plan``: :func:`ablation_plan`'s
    answer for the same route, base and stages, when the caller has it already."""
    rule = rule or VerdictRule()
    toggles, required, given = plan or ablation_plan(runner, route, base, stages)
    candidates = [s for s in toggles if s not in required]
    state: dict[str, bool] = dict.fromkeys(candidates, False)
    current = Variant("baseline (all off)", route, _with_toggles(base, state))
    current_run: VariantRun | None = None  # the current state's latest run
    steps: list[dict[str, Any]] = [{
        "step": 0, "stage": None, "label": current.label, "metrics": {},
        "verdict": "BASELINE", "reasons": [], "enabled": sorted(k for k, v in state.items() if v),
    }]
    for i, sid in enumerate(candidates, start=1):
        trial_state = {**state, sid: True}
        trial = Variant(f"+{sid}", route, _with_toggles(base, trial_state))
        step: dict[str, Any] = {"step": i, "stage": sid, "label": trial.label,
                                "enabled": sorted(k for k, v in trial_state.items() if v)}
        if same_configuration(runner, current, trial):
            current_run = current_run or runner.run_variant(current, progress=progress)
            steps[0]["metrics"] = steps[0]["metrics"] or current_run.metrics
            steps.append({**step, "metrics": current_run.metrics, "verdict": "SAME", "ran": False,
                          "reasons": [f"unchanged: switching {sid} on leaves what the route runs as it was "
                                      f"({_idle_reason(runner.resolve(trial), sid)}); not run"]})
            continue
        current_run, trial_run = runner.run_variants([current, trial], progress=progress)
        steps[0]["metrics"] = steps[0]["metrics"] or current_run.metrics  # the baseline's first run
        verdict, reasons = rule.decide(current_run.metrics, trial_run.metrics, paired_latencies(current_run, trial_run))
        steps.append({**step, "metrics": trial_run.metrics, "verdict": verdict, "reasons": reasons, "ran": True,
                      "per_question": per_question_wlt(current_run.per_question, trial_run.per_question)})
        if verdict == "KEEP":
            state, current, current_run = trial_state, trial, trial_run
    if current_run is None:  # nothing to toggle: the baseline alone
        current_run = runner.run_variant(current, progress=progress)
        steps[0]["metrics"] = current_run.metrics
    kept = [s for s in candidates if state[s]]
    same = [st["stage"] for st in steps[1:] if st["verdict"] == "SAME"]
    reverted = [s for s in candidates if not state[s] and s not in same]
    return {
        "route": route,
        "rule": rule.describe(),
        "toggleable": toggles,
        "required": required,
        "steps": steps,
        "kept": kept,
        "reverted": reverted,
        "same": same,
        # the flags that turn the route as given into the kept state (none where they agree)
        "final_overrides": [f"--disable {s}" for s in [*reverted, *same] if given.get(s, True)]
        + [f"--enable {s}" for s in kept if not given.get(s, False)],
        "final_metrics": current_run.metrics,
    }
