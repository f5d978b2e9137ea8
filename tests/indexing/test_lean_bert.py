"""The local embedder's lean path for one text: the same vectors as the library to the bit,
checked on first use, and the library's path whenever the model or the input is not the
plain case it was written for."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from graphroute.plugins.embedders import bert_forward
from graphroute.plugins.embedders.bert_forward import LeanBert, bert_encoder
from graphroute.plugins.embedders.local import (
    LocalEmbedder,
    encode_batch,
    lean_path,
    load_model,
    packaged_model_path,
)

QUESTIONS = [
    "Who founded the company that built the Velmar harbour crane?",
    "When?",
    "In what year did the author of the novel about the glassmakers of Orlen die, and where was she buried "
    "after the long dispute between her heirs and the city council over the estate?",
    " ".join(f"Clause {j} of the charter names the guild and its harbour." for j in range(60)),  # > 256 tokens
    "Ünïcödé naïve café — what’s “this”?",
]


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return load_model(packaged_model_path())


def test_one_text_comes_out_as_encode_makes_it_to_the_bit(model) -> None:  # type: ignore[no-untyped-def]
    lean = lean_path(model)
    assert lean.bert is not None  # the packaged all-MiniLM-L6-v2 is a plain BERT encoder
    for q in QUESTIONS:
        ref = model.encode([q], convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        mine = encode_batch(model, [q])
        assert mine.dtype == np.float32 and mine.shape == ref.shape
        assert np.array_equal(mine, ref), q[:40]
    assert lean.verified is True
    vec = LocalEmbedder().embed([QUESTIONS[0]], input_type="query")
    assert np.array_equal(vec, encode_batch(model, [QUESTIONS[0]]))


def test_token_embeddings_equal_bert_forward(model) -> None:  # type: ignore[no-untyped-def]
    bert = bert_encoder(model)
    with torch.inference_mode():
        for q in QUESTIONS:
            feats = model.preprocess([q])
            ref = bert(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"],
                       token_type_ids=feats["token_type_ids"]).last_hidden_state
            assert torch.equal(bert_forward.token_embeddings(bert, feats["input_ids"]), ref)


def test_a_disagreeing_path_is_dropped_after_the_first_call(model, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = bert_forward.token_embeddings
    calls = []

    def off_by_a_little(bert, ids):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(bert, ids) + 1e-6

    monkeypatch.setattr(bert_forward, "token_embeddings", off_by_a_little)
    lean = LeanBert(model)
    with torch.inference_mode():
        for q in QUESTIONS[:3]:
            out = lean.forward(model.preprocess([q]))["sentence_embedding"]
            assert torch.equal(out, model(model.preprocess([q]))["sentence_embedding"])
    assert lean.verified is False
    assert len(calls) == 1  # tried once, then never again


def test_batches_and_other_models_keep_the_librarys_path(model, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def fail(bert, ids):  # type: ignore[no-untyped-def]
        raise AssertionError("lean path taken")

    other = copy.deepcopy(model)
    other[0].auto_model.config.hidden_act = "relu"  # not the activation the lean path computes
    assert bert_encoder(other) is None
    monkeypatch.setattr(bert_forward, "token_embeddings", fail)
    with torch.inference_mode():
        feats = model.preprocess(QUESTIONS[:2])  # two texts: padded, the library's path
        out = LeanBert(model).forward(feats)
    assert out["sentence_embedding"].shape == (2, 384)
    assert LeanBert(other).verified is False
    other[0].auto_model.config.hidden_act = "gelu"
    other[0].auto_model.train()
    assert bert_encoder(other) is None  # dropout on: not the eval-mode arithmetic
