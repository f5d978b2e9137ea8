"""The local embedder's batches: texts sorted by length, each batch padded only to its
longest text and held under a token budget (long texts in smaller forward passes, to bound
the attention memory of one batch); padding never changes a vector."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.plugins.embedders.local import LocalEmbedder, load_model, token_batches


def _texts() -> list[str]:
    """Short sentences and long passages mixed, so the budget splits some batches."""
    out: list[str] = []
    for i in range(40):
        if i % 5 == 0:
            out.append(" ".join(f"Clause {j} of record {i} names the harbour of Velmar and its guild." for j in range(2 + i)))
        else:
            out.append(f"Record {i} mentions a short fact about person {i * 7}.")
    return out


def test_batches_cover_every_row_once_longest_first_within_the_budget() -> None:
    model = load_model()
    texts = _texts()
    lengths = np.array([len(e.ids) for e in model.tokenize(texts)])
    batches = token_batches(lengths, batch_size=16, max_tokens=256)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(len(texts)))
    assert list(lengths[rows]) == sorted(lengths, reverse=True)  # longest first, so neighbours pad little
    sizes = []
    for b in batches:
        longest = int(lengths[b].max())
        assert len(b) <= 16
        assert len(b) == 1 or len(b) * longest <= 256
        sizes.append(len(b))
    assert min(sizes) < 16 and max(sizes) == 16  # long texts were split, short ones were not
    plain = token_batches(lengths, batch_size=16, max_tokens=0)
    assert [len(b) for b in plain] == [16, 16, 8]


@pytest.mark.parametrize("precision", ["f32", "auto"])
def test_padding_is_masked_out_whatever_the_batching(precision: str) -> None:
    """The same vectors alone (no padding), in budgeted batches and in batches of up to 64
    padded to their longest text: mean pooling counts real tokens only. In float32 they are
    equal to rounding; bfloat16 (``auto`` on a CPU with it) rounds differently per batch
    shape, within a cosine of 0.99995, where counting padding would cost far more."""
    texts = _texts()
    model = load_model(precision=precision)
    alone = np.stack([model.encode([t])[0] for t in texts])  # a long text: its windows alone
    budgeted = LocalEmbedder(LocalEmbedder.Params(max_batch_tokens=256, precision=precision)).embed(texts)
    wide = LocalEmbedder(LocalEmbedder.Params(max_batch_tokens=0, precision=precision)).embed(texts)
    assert budgeted.dtype == np.float32 and budgeted.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(wide, axis=1), 1.0, atol=1e-6)
    if precision == "f32":
        assert float(np.abs(budgeted - alone).max()) < 1e-5
        assert float(np.abs(wide - alone).max()) < 1e-5
    else:
        assert float((budgeted * alone).sum(axis=1).min()) > 0.99995
        assert float((wide * alone).sum(axis=1).min()) > 0.99995
    lengths = [len(e.ids) for e in model.tokenize(texts)]
    assert max(lengths) > 4 * min(lengths)  # the unbudgeted batches really padded short texts
    # what counting the padding would do to the shortest text in the widest batch
    short = int(np.argmin(lengths))
    out, _ = model.hidden([e.ids for e in model.tokenize(texts)])
    unmasked = out[short].mean(axis=0)
    assert float(unmasked @ alone[short] / np.linalg.norm(unmasked)) < 0.999
