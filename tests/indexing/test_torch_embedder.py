"""The torch extra's embedder (``sentence_transformers``): the library's own vectors under the
token-budgeted batches, the same tokens as the default ONNX runtime, vectors within the stated
tolerance of it, its own record in the store, and no progress bar on stderr."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.constants import EMBEDDER_MODEL_META
from graphroute.core.api.store import GraphStore
from graphroute.core.config.index_profile import ComponentSpec
from graphroute.core.errors import EmbedderMismatchError
from graphroute.core.query.services import Services
from graphroute.plugins.embedders import st_torch
from graphroute.plugins.embedders.local import LocalEmbedder, load_model

from .conftest import SAMPLE_CORPUS, skeleton_profile

pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.torch

# the largest distance between the two runtimes' vectors that docs/models.md states
MIN_COSINE = 0.998


def _texts() -> list[str]:
    out = [line.strip() for f in sorted(SAMPLE_CORPUS.glob("*")) for line in f.read_text(encoding="utf-8").splitlines()]
    out = [t for t in out if len(t) > 20]
    out += [
        "Ünïcödé naïve café — what’s “this”?",
        "When?",
        " ".join(f"Clause {j} of the charter names the guild and its harbour." for j in range(60)),  # > 256 tokens
    ]
    return out


def test_budgeted_batches_give_the_librarys_vectors() -> None:
    texts = _texts()
    model = st_torch.load_model(st_torch.packaged_model_folder())
    ref = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    got = st_torch.SentenceTransformersEmbedder(st_torch.SentenceTransformersEmbedder.Params(max_batch_tokens=256)).embed(texts)
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert float(np.abs(got - ref).max()) < 1e-5


def test_both_runtimes_read_the_same_tokens_and_agree_within_the_stated_tolerance() -> None:
    texts = _texts()
    st = st_torch.load_model(st_torch.packaged_model_folder())
    assert st.max_seq_length == 256
    theirs = st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]
    ours = [e.ids for e in load_model().tokenize(texts)]
    assert ours == theirs
    onnx = LocalEmbedder(LocalEmbedder.Params(long_texts="truncate")).embed(texts)  # sentence-transformers' way
    torch_vecs = st_torch.SentenceTransformersEmbedder().embed(texts)
    cos = (onnx * torch_vecs).sum(axis=1)
    assert float(cos.min()) >= MIN_COSINE, float(cos.min())
    assert float(cos.min()) < 1.0  # int8 weights: close, not equal, hence the record in the store


def test_the_store_keeps_each_runtimes_vectors_apart(make_indexer, store: GraphStore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SAMPLE_CORPUS / "appliance_warranty.txt", corpus)
    profile = skeleton_profile()
    profile.embedder = ComponentSpec(use="sentence_transformers")
    make_indexer(profile=profile).index_paths([corpus])
    assert store.get_meta("g", EMBEDDER_MODEL_META) == st_torch.MODEL_ID
    assert Services(store, "g").embedder().model_id == st_torch.MODEL_ID
    with pytest.raises(EmbedderMismatchError):
        Services(store, "g", embedder=LocalEmbedder()).embedder()
    assert make_indexer().index_paths([corpus]).indexed == 1  # the default profile re-embeds it


def test_loading_prints_no_progress_bar() -> None:
    probe = (
        "from graphroute.plugins.embedders.st_torch import SentenceTransformersEmbedder\n"
        "print(SentenceTransformersEmbedder().embed(['one text']).shape)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "(1, 384)"
    assert "Loading" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr[-2000:]
