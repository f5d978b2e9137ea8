"""One text through a BERT encoder as a plain sequence of torch calls.

Why: a query is one short text, and for it transformers' module tree costs as much as the
arithmetic. all-MiniLM-L6-v2 on a MuSiQue question (~16 tokens) spends ~11.5 ms in
``model(features)``; the same torch operations on the same weights, called in the same order
without the per-module dispatch (``nn.Module.__call__`` ~120 times, the output-capturing and
signature-inspecting decorators, the attention-mask builder), take ~9.5 ms
(``docs/performance.md``, twentieth round). Batches keep the library's path: with padding the
mask matters and the dispatch is spread over many texts.

The token embeddings are those of ``BertModel.forward`` to the bit (the same kernels on the
same tensors), and :class:`LeanBert` proves it for the model it is given: its first call runs
both paths and compares them, and a model for which they differ in any bit keeps the library's
path for the rest of the process. Models that are not a plain BERT encoder (another
architecture, a decoder, relative positions, another activation or attention kernel) never
take this path.
"""

from __future__ import annotations

import threading
from typing import Any

TOKEN_EMBEDDINGS = "token_embeddings"


def bert_encoder(model: Any) -> Any | None:
    """The ``BertModel`` of a SentenceTransformer whose first module feeds its token
    embeddings to the rest, or None when the model is built any other way."""
    try:
        from transformers import BertModel
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        return None
    modules = list(model) if hasattr(model, "__iter__") else []
    if len(modules) < 2:
        return None
    first = modules[0]
    bert = getattr(first, "auto_model", None)
    if type(bert) is not BertModel or getattr(first, "module_output_name", TOKEN_EMBEDDINGS) != TOKEN_EMBEDDINGS:
        return None
    config = bert.config
    plain = (
        not config.is_decoder
        and not getattr(config, "add_cross_attention", False)
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
        and config.hidden_act == "gelu"
        and getattr(config, "_attn_implementation", None) == "sdpa"
        and not getattr(config, "chunk_size_feed_forward", 0)
        and not getattr(config, "output_hidden_states", False)
        and not bert.training
    )
    return bert if plain else None


def token_embeddings(bert: Any, input_ids: Any) -> Any:
    """Last hidden states of ``bert`` for one unpadded sequence, shape (1, n, hidden): the
    operations of ``BertModel.forward`` in eval mode (dropout is the identity) in its order."""
    import torch.nn.functional as F

    emb = bert.embeddings
    eps = bert.config.layer_norm_eps
    n = int(input_ids.shape[1])
    x = F.embedding(input_ids, emb.word_embeddings.weight)
    x = x + F.embedding(emb.token_type_ids[:, :n], emb.token_type_embeddings.weight)
    x = x + F.embedding(emb.position_ids[:, :n], emb.position_embeddings.weight)
    width = (x.shape[-1],)
    x = F.layer_norm(x, width, emb.LayerNorm.weight, emb.LayerNorm.bias, eps)
    for layer in bert.encoder.layer:
        att = layer.attention.self
        heads = (1, n, att.num_attention_heads, att.attention_head_size)
        q = F.linear(x, att.query.weight, att.query.bias).view(heads).transpose(1, 2)
        k = F.linear(x, att.key.weight, att.key.bias).view(heads).transpose(1, 2)
        v = F.linear(x, att.value.weight, att.value.bias).view(heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, scale=att.scaling)
        a = a.transpose(1, 2).contiguous().reshape(1, n, -1).contiguous()
        out = layer.attention.output
        x = F.layer_norm(F.linear(a, out.dense.weight, out.dense.bias) + x, width, out.LayerNorm.weight, out.LayerNorm.bias, eps)
        h = F.gelu(F.linear(x, layer.intermediate.dense.weight, layer.intermediate.dense.bias))
        out = layer.output
        x = F.layer_norm(F.linear(h, out.dense.weight, out.dense.bias) + x, width, out.LayerNorm.weight, out.LayerNorm.bias, eps)
    return x


class LeanBert:
    """The lean path for one SentenceTransformer, checked against the library on first use."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.bert = bert_encoder(model)
        self.verified: bool | None = None if self.bert is not None else False
        self._lock = threading.Lock()

    def forward(self, features: dict[str, Any]) -> dict[str, Any]:
        """``model(features)`` for preprocessed features of one text, by the lean path once
        it has been shown to agree with the library; call under ``torch.inference_mode``."""
        ids = features.get("input_ids")
        mask = features.get("attention_mask")
        one_unpadded = ids is not None and ids.shape[0] == 1 and (mask is None or bool(mask.all()))
        if not one_unpadded or self.verified is False:
            return self.model(features)  # type: ignore[no-any-return]
        if self.verified is None:
            with self._lock:
                if self.verified is None:
                    reference = self.model(dict(features))
                    mine = token_embeddings(self.bert, ids)
                    self.verified = bool(mine.shape == reference[TOKEN_EMBEDDINGS].shape and (mine == reference[TOKEN_EMBEDDINGS]).all())
                    return reference  # type: ignore[no-any-return]
        features[TOKEN_EMBEDDINGS] = token_embeddings(self.bert, ids)
        for module in list(self.model)[1:]:
            features = module(features)
        return features
