"""Benchmark reports: Markdown tables and PNG plots (matplotlib, Agg backend).

``bench --out DIR`` writes ``bench.json``, ``report.md``, ``recall.png`` and
``latency.png``; ``ab`` and ``ablate`` write their JSON and Markdown. Plots are optional:
without matplotlib (the ``bench`` extra) the Markdown says so and the rest is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphroute.core.apps.bench.bench import LLM_METRICS

SUMMARY_COLUMNS = (
    "questions", "recall@2", "recall@5", "recall@10", "signal_rank", "signal_rank1", "containment",
    "em", "f1", "negative_pass", "context_tokens_mean", "chunks_mean", "latency_ms_p50",
    "latency_ms_p95", "index_seconds",
)
# answerable and unanswerable questions side by side (printed when a bank has unanswerable ones):
# recall and containment count answerable questions only, negative_pass unanswerable ones only
NEGATIVE_COLUMNS = (
    "answerable", "recall@5", "containment", "false_negative", "unanswerable", "negative_pass",
)
ABLATE_COLUMNS = ("containment", "f1", "recall@5", "chunks_mean", "context_tokens_mean", "latency_ms_p50", "negative_pass")


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.1f}"
        return f"{value:.3f}"
    return str(value)


def _cell(text: Any) -> str:
    return fmt(text).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_rows(routes: dict[str, dict[str, Any]], columns: Sequence[str] = SUMMARY_COLUMNS) -> list[list[Any]]:
    return [[name, *(m.get(c) for c in columns)] for name, m in routes.items()]


# --------------------------------------------------------------------------- bench


def bench_markdown(data: dict[str, Any], plots: Sequence[str] = ()) -> str:
    ds = data["dataset"]
    parts = [
        f"# Benchmark: {ds.get('name', '')}",
        "",
        f"{ds.get('questions')} questions, {ds.get('passages')} passages, group `{ds.get('group')}` "
        f"(index profile `{ds.get('index_profile')}`, indexed in {fmt(ds.get('index_seconds'))} s"
        f"{', cached' if ds.get('index_cached') else ''}).",
        "",
        "Recall@k is passage recall (|gold ∩ top-k| / |gold|, HippoRAG); signal_rank is the mean rank of "
        "the first gold passage where one is ranked, signal_rank1 the share of questions where it is "
        "rank 1; containment means the gold answer or an alias is in the synthesizer's context.",
        "",
        "## Summary",
        "",
        table(["route", *SUMMARY_COLUMNS], summary_rows(data["routes"])),
        "",
    ]
    if ds.get("unanswerable"):
        parts += [
            "## Answerable and unanswerable questions",
            "",
            "Recall and containment count the answerable questions only (a \"not found\" answer "
            "contains nothing); negative_pass is the share of unanswerable questions answered "
            "\"not found\", false_negative the share of answerable ones.",
            "",
            table(["route", *NEGATIVE_COLUMNS], summary_rows(data["routes"], NEGATIVE_COLUMNS)),
            "",
        ]
    variants = data.get("variants") or {}
    if any(len(v) > 1 for v in variants.values()):
        parts += ["Overrides:", ""]
        parts += [f"- `{name}`: {json.dumps(v)}" for name, v in variants.items() if len(v) > 1]
        parts.append("")
    for p in plots:
        parts += [f"![{Path(p).stem}]({Path(p).name})", ""]
    if not plots:
        parts += ["(plots not written: matplotlib is not installed; `pip install graphroute[bench]`)", ""]
    parts += llm_section(data)
    by_route: dict[str, list[dict[str, Any]]] = {}
    for rec in data.get("per_question", []):
        by_route.setdefault(rec["route"], []).append(rec)
    for route, recs in by_route.items():
        parts += [f"## Per question: {route}", ""]
        rows = [
            [r["id"], r["recall@2"], r["recall@5"], r["recall@10"], r["signal_rank"], r["containment"],
             r["f1"], r["negative"], r["context_tokens"], r["chunks"], r["latency_ms"]]
            for r in recs
        ]
        parts.append(table(["id", "R@2", "R@5", "R@10", "signal rank", "contained", "f1", "negative",
                            "tokens", "chunks", "ms"], rows))
        parts.append("")
    return "\n".join(parts)


LLM_COLUMNS = ("em", "f1", *LLM_METRICS)


def llm_routes(routes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The routes whose questions called a model (they carry ``llm_*`` metrics)."""
    return {name: m for name, m in routes.items() if m.get("llm_calls_mean") is not None}


def llm_section(data: dict[str, Any]) -> list[str]:
    """Answer quality and model cost of the routes that called a model: a summary table, the
    model and endpoint that answered (figures are that model's: a local stand-in server gives
    that server's figures), and per question EM, F1, tokens and cost. [] when none did."""
    routes = llm_routes(data["routes"])
    if not routes:
        return []
    parts = [
        "## LLM answers",
        "",
        "EM and F1 score the answer text; calls and tokens (prompt + completion) are per question, "
        "summed over every stage that called a model; cost is USD per 1,000 questions and in total "
        "(the client's price table; 0 for cached replies and unknown models).",
        "",
        table(["route", *LLM_COLUMNS], summary_rows(routes, LLM_COLUMNS)),
        "",
    ]
    parts += [f"- `{name}` answered by {m['llm_model']}" for name, m in routes.items() if m.get("llm_model")]
    parts.append("")
    for route in routes:
        recs = [r for r in data.get("per_question", []) if r["route"] == route]
        rows = [
            [r["id"], r.get("em"), r.get("f1"), r.get("llm_calls"),
             r.get("llm_prompt_tokens"), r.get("llm_completion_tokens"), f"{float(r.get('llm_cost_usd') or 0.0):.6f}",
             r.get("answer", "")[:80]]
            for r in recs
        ]
        parts += [f"### LLM per question: {route}", ""]
        parts.append(table(["id", "em", "f1", "calls", "prompt tokens", "completion tokens", "cost usd", "answer"], rows))
        parts.append("")
    return parts


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_recall(routes: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """Grouped bars of recall@2/5/10 per route."""
    plt = _pyplot()
    if plt is None:
        return None
    names = list(routes)
    ks = ("recall@2", "recall@5", "recall@10")
    width = 0.8 / len(ks)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(names) + 2), 3.8))
    for j, k in enumerate(ks):
        xs = [i + (j - 1) * width for i in range(len(names))]
        vals = [routes[n].get(k) or 0.0 for n in names]
        bars = ax.bar(xs, vals, width, label=k)
        ax.bar_label(bars, labels=[f"{v:.2f}" for v in vals], fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("passage recall")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Passage recall@k")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_latency(per_question: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Box plot of per-question latency per route."""
    plt = _pyplot()
    if plt is None:
        return None
    by_route: dict[str, list[float]] = {}
    for rec in per_question:
        by_route.setdefault(rec["route"], []).append(float(rec["latency_ms"]))
    if not by_route:
        return None
    names = list(by_route)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(names) + 2), 3.8))
    ax.boxplot([by_route[n] for n in names], showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
    ax.set_ylabel("latency per question (ms)")
    ax.set_title("Query latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_bench(data: dict[str, Any], out: Path) -> list[Path]:
    """bench.json, report.md and the plots; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "bench.json"]
    written[0].write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    plots = [p for p in (plot_recall(data["routes"], out / "recall.png"),
                         plot_latency(data.get("per_question", []), out / "latency.png")) if p is not None]
    md = out / "report.md"
    md.write_text(bench_markdown(data, [str(p) for p in plots]), encoding="utf-8")
    return [*written, md, *plots]


# --------------------------------------------------------------------------- A/B


def ab_markdown(cmp: dict[str, Any]) -> str:
    a, b = cmp["a"], cmp["b"]
    rows = []
    for key, d in cmp["deltas"].items():
        rows.append([key, a["metrics"].get(key), b["metrics"].get(key), None if d is None else f"{d:+.4f}"])
    parts = [
        f"# A/B: {a['label']} vs {b['label']}",
        "",
        f"- A `{a['label']}`: {json.dumps({k: v for k, v in a.items() if k not in ('label', 'metrics')})}",
        f"- B `{b['label']}`: {json.dumps({k: v for k, v in b.items() if k not in ('label', 'metrics')})}",
        "",
        *(f"> warning: {note}\n" for note in cmp.get("notes", [])),
        f"**Verdict: {cmp['verdict']}** ({'; '.join(cmp['reasons']) or '-'})",
        "",
        f"Rule: {cmp['rule']}",
        "",
        table(["metric", "A", "B", "B - A"], rows),
        "",
    ]
    for key, wlt in cmp["per_question"].items():
        parts += [f"## Per question: {key} (B vs A) - wins {wlt['wins']}, losses {wlt['losses']}, ties {wlt['ties']}", ""]
        if wlt["changed"]:
            parts.append(table(["id", "A", "B", "delta"], [[c["id"], c["a"], c["b"], f"{c['delta']:+.4f}"] for c in wlt["changed"]]))
            parts.append("")
    return "\n".join(parts)


# --------------------------------------------------------------------------- ablation


def ablate_rows(result: dict[str, Any]) -> list[list[Any]]:
    return [
        [s["step"], s["stage"] or "(all toggleable off)", *(s["metrics"].get(c) for c in ABLATE_COLUMNS), s["verdict"]]
        for s in result["steps"]
    ]


def ablate_markdown(result: dict[str, Any]) -> str:
    parts = [
        f"# Ablation: {result['route']}",
        "",
        "Every toggleable stage off, then each enabled in route order; only a KEEP stays on for the "
        "following steps, a REVERT or SAME (same quality) stage stays off (the reference's sequential "
        "KEEP/REVERT experiment).",
        "",
        f"Rule: {result['rule']}",
        "",
        f"Required (never switched off): {', '.join(result['required']) or 'none'}",
        "",
        table(["step", "stage", *ABLATE_COLUMNS, "verdict"], ablate_rows(result)),
        "",
        f"Kept: {', '.join(result['kept']) or 'none'}; reverted: {', '.join(result['reverted']) or 'none'}; "
        f"same quality (left off): {', '.join(result.get('same', [])) or 'none'}",
        "",
        f"Final overrides: `{' '.join(result['final_overrides'])}`",
        "",
    ]
    for s in result["steps"][1:]:
        parts.append(f"- step {s['step']} `{s['stage']}`: {s['verdict']} ({'; '.join(s['reasons']) or '-'})")
    parts.append("")
    return "\n".join(parts)


def write_doc(out: Path, stem: str, data: dict[str, Any], markdown: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    j, m = out / f"{stem}.json", out / f"{stem}.md"
    j.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    m.write_text(markdown, encoding="utf-8")
    return [j, m]
