"""The local embedder's token-budgeted batches (long texts in smaller forward passes, to
bound the attention memory of one batch) give the same vectors as the model's own batching."""

from __future__ import annotations

import numpy as np
from graphroute.plugins.embedders.local import (
    LocalEmbedder,
    encode_batch,
    load_model,
    packaged_model_path,
    token_batches,
)


def _texts() -> list[str]:
    """Short sentences and long passages mixed, so the budget splits some batches."""
    out: list[str] = []
    for i in range(40):
        if i % 5 == 0:
            out.append(" ".join(f"Clause {j} of record {i} names the harbour of Velmar and its guild." for j in range(2 + i)))
        else:
            out.append(f"Record {i} mentions a short fact about person {i * 7}.")
    return out


def test_batches_cover_every_row_once_within_the_budget() -> None:
    model = load_model(packaged_model_path())
    texts = _texts()
    batches = token_batches(model, texts, batch_size=16, max_tokens=256)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(len(texts)))
    lengths = [len(x) for x in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]]
    sizes = []
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 16
        assert len(b) == 1 or len(b) * longest <= 256
        sizes.append(len(b))
    assert min(sizes) < 16 and max(sizes) == 16  # long texts were split, short ones were not


def test_same_vectors_as_one_encode_call() -> None:
    texts = _texts()
    model = load_model(packaged_model_path())
    ref = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    budgeted = LocalEmbedder(LocalEmbedder.Params(max_batch_tokens=256)).embed(texts)
    plain = LocalEmbedder(LocalEmbedder.Params(max_batch_tokens=0)).embed(texts)
    assert budgeted.dtype == np.float32 and budgeted.shape == ref.shape
    assert float(np.abs(budgeted - ref).max()) < 1e-5
    assert float(np.abs(plain - ref).max()) < 1e-5


def test_one_forward_pass_gives_encodes_vectors_to_the_bit() -> None:
    """``encode_batch`` skips ``encode``'s per-call bookkeeping, not any of its arithmetic:
    a question alone and a budgeted batch come out bit-equal to ``encode`` on the same rows."""
    model = load_model(packaged_model_path())
    texts = _texts()

    def reference(rows: list[str]) -> np.ndarray:
        return model.encode(rows, batch_size=len(rows), convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)

    question = ["Who founded the harbour guild of Velmar?"]
    assert np.array_equal(encode_batch(model, question), reference(question))
    for rows in token_batches(model, texts, batch_size=16, max_tokens=256):
        batch = [texts[i] for i in rows]
        got = encode_batch(model, batch)
        assert got.dtype == np.float32
        assert np.array_equal(got, reference(batch))
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
