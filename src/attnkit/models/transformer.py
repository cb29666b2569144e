"""A pre-norm Transformer encoder-decoder (Vaswani et al. 2017) from attnkit parts.

Self- and cross-attention are `attnkit.attention.multi_head.MultiHeadAttention`; positions
come from `attnkit.positional` (sinusoidal or learned, summed with the ``sqrt(d)``-scaled
embeddings). Pre-norm (``x + f(LayerNorm(x))``, a final LayerNorm on each stack) trains stably
without warm-up tricks at small sizes.

Same step API as `RNNSeq2Seq`. ``encode(..., use_cache=True)``
(the default) makes ``decode_step`` incremental: the state carries a
`LayerCache` per decoder layer (source keys/values projected
once per sentence, one self-attention key/value row appended per step), so a step costs one
position instead of the whole prefix. ``use_cache=False`` keeps the reference path that
recomputes the whole target prefix every step (tests and benchmarks compare the two).

Attention weights are computed only when asked: training (``forward``) and
``decode_step(..., need_weights=False)`` run the fused SDPA kernels everywhere;
``need_weights=True`` returns the last decoder layer's cross-attention of the new position
averaged over heads (plots, ``<unk>`` replacement), computed explicitly in that layer only;
``need_weights="all"`` returns every layer's and head's (the attention explorer page).
``forward(..., need_weights=True)`` returns the cross-attention of every layer and head.

Example:
    ```python
    model = TransformerSeq2Seq(TransformerConfig(src_vocab=100, tgt_vocab=120, d_model=64,
                                                 heads=4, layers=2, ff_dim=128))
    logits, cross = model(src, src_lengths, tgt_in, need_weights=True)
    # logits [batch, T, 120]; cross: 2 tensors [batch, 4, T, S]
    ```
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention.multi_head import MultiHeadAttention
from attnkit.models.config import TransformerConfig
from attnkit.models.kv_cache import (
    LayerCache,
    cached_cross_attention,
    cached_self_attention,
    project_memory,
)
from attnkit.models.rnn_encoder import check_teacher_input, check_tokens
from attnkit.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


def _feed_forward(d: int, ff: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff, d))


class EncoderLayer(nn.Module):
    """``x + SelfAttn(LN(x))`` then ``x + FF(LN(x))``; padded keys masked. ``[batch, S, d]``."""

    def __init__(self, d: int, heads: int, ff: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = MultiHeadAttention(d, num_heads=heads, dropout=dropout)
        self.ff = _feed_forward(d, ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, lengths: Tensor, need_weights: bool = False):
        """``x [batch, S, d]`` -> the layer's output, and with ``need_weights`` also its
        self-attention ``[batch, heads, S, S]``."""
        h = self.norm1(x)
        out = self.attn(h, h, key_lengths=lengths, need_weights=need_weights)
        x = x + self.drop(out.context)
        x = x + self.drop(self.ff(self.norm2(x)))
        return (x, out.weights) if need_weights else x


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the source, feed-forward; all pre-norm.

    Call: ``layer(y [batch, T, d], memory [batch, S, d], src_lengths [batch],
    need_weights=False)`` -> ``(y, cross weights [batch, heads, T, S] or None)``; the weights
    are computed (explicit softmax instead of the fused kernel) only with ``need_weights``.
    ``step`` is the incremental form for one new position over a `LayerCache`.
    """

    def __init__(self, d: int, heads: int, ff: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn = MultiHeadAttention(d, num_heads=heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d, num_heads=heads, dropout=dropout)
        self.ff = _feed_forward(d, ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, y: Tensor, memory: Tensor, src_lengths: Tensor,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        h = self.norm1(y)
        y = y + self.drop(self.self_attn(h, h, causal=True).context)
        cross = self.cross_attn(self.norm2(y), memory, key_lengths=src_lengths,
                                need_weights=need_weights)
        y = y + self.drop(cross.context)
        return y + self.drop(self.ff(self.norm3(y))), cross.weights

    def step(self, y: Tensor, cache: LayerCache, key_mask: Tensor,
             need_weights: bool = False) -> tuple[Tensor, LayerCache, Tensor | None]:
        """One new position ``y [batch, 1, d]`` -> ``(y, cache + its key/value, cross weights
        [batch, heads, 1, S] or None)``; ``key_mask [batch, 1, 1, S]`` (True = real source)."""
        attended, cache = cached_self_attention(self.self_attn, self.norm1(y), cache)
        y = y + self.drop(attended)
        cross, weights = cached_cross_attention(self.cross_attn, self.norm2(y), cache,
                                                key_mask, need_weights)
        y = y + self.drop(cross)
        return y + self.drop(self.ff(self.norm3(y))), cache, weights


@dataclass
class TransformerState:
    """Decoding state: the encoded source, the target prefix so far (BOS first), the cache.

    Attributes:
        memory: ``[batch, S, d_model]`` encoder output.
        src_lengths: ``[batch]``.
        prefix: ``[batch, t]`` target ids fed so far.
        cache: one `LayerCache` per decoder layer (incremental decoding), or None
            (``use_cache=False``: every step recomputes the whole prefix).
    """

    memory: Tensor
    src_lengths: Tensor
    prefix: Tensor
    cache: tuple[LayerCache, ...] | None = None

    def reorder(self, index: Tensor) -> TransformerState:
        cache = None if self.cache is None else tuple(c.reorder(index) for c in self.cache)
        return TransformerState(self.memory.index_select(0, index),
                                self.src_lengths.index_select(0, index),
                                self.prefix.index_select(0, index), cache)


@dataclass
class TeacherForced:
    """What `TransformerSeq2Seq.teacher_forced` returns.

    Attributes:
        logits: ``[batch, T, V]`` (None when not asked).
        cross: per decoder layer, the cross-attention ``[batch, heads, T, S]``.
        states: per decoder layer, its output ``[batch, T, d]`` (before the final norm).
        memory: the encoder output ``[batch, S, d]``.
        encoder: per encoder layer, its self-attention ``[batch, heads, S, S]``.
    """

    logits: Tensor | None
    cross: list[Tensor]
    states: list[Tensor]
    memory: Tensor
    encoder: list[Tensor]


class TransformerSeq2Seq(nn.Module):
    """The Transformer translation model.

    Args:
        config: a `TransformerConfig`.

    Call:
        ``model(src [batch, S], src_lengths [batch], tgt_in [batch, T], need_weights=False)``
        -> ``logits [batch, T, tgt_vocab]``, plus with ``need_weights=True`` a list (one per
        decoder layer) of cross-attention weights ``[batch, heads, T, S]``.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        d = c.d_model
        self.tgt_embedding = nn.Embedding(c.tgt_vocab, d, padding_idx=c.pad_id)
        # A joint subword vocabulary lets both languages share one table (fewer parameters,
        # and names/numbers copied from the source already have the right target embedding).
        self.src_embedding = (self.tgt_embedding if c.share_embeddings
                              else nn.Embedding(c.src_vocab, d, padding_idx=c.pad_id))
        for emb in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(emb.weight, std=d ** -0.5)  # with the sqrt(d) scale: unit variance
            with torch.no_grad():
                emb.weight[c.pad_id].zero_()
        if c.positional == "learned":
            self.positions = LearnedPositionalEmbedding(c.max_len, d)
        else:
            self.positions = SinusoidalPositionalEncoding(d)
        self.drop = nn.Dropout(c.dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d, c.heads, c.ff_dim, c.dropout) for _ in range(c.layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d, c.heads, c.ff_dim, c.dropout) for _ in range(c.layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.out = nn.Linear(d, c.tgt_vocab, bias=False)
        if c.tie_embeddings:
            self.out.weight = self.tgt_embedding.weight

    def _embed(self, emb: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        x = emb(tokens) * math.sqrt(self.config.d_model)
        return self.drop(self.positions(x, offset))

    @property
    def source_embedding(self) -> nn.Embedding:
        """The table the source tokens are looked up in (the target's with shared embeddings)."""
        return self.src_embedding

    def encode(self, src: Tensor, src_lengths: Tensor, use_cache: bool = True,
               embedded: Tensor | None = None) -> TransformerState:
        """Encode the source: ``src [batch, S]`` -> state with memory ``[batch, S, d]``; with
        ``use_cache`` also every decoder layer's cross-attention keys/values (projected once).
        ``embedded [batch, S, d]``: the looked-up source vectors to use instead of
        ``self.src_embedding(src)`` (attributions take gradients with respect to them)."""
        check_tokens(src, src_lengths)
        src_lengths = src_lengths.to(src.device)
        if embedded is None:
            x = self._embed(self.src_embedding, src)
        else:
            x = self.drop(self.positions(embedded * math.sqrt(self.config.d_model), 0))
        for layer in self.encoder_layers:
            x = layer(x, src_lengths)
        memory = self.encoder_norm(x)
        prefix = src.new_empty(src.shape[0], 0)
        cache = None
        if use_cache:
            cache = tuple(self._empty_cache(layer, memory) for layer in self.decoder_layers)
        return TransformerState(memory, src_lengths, prefix, cache)

    def _empty_cache(self, layer: DecoderLayer, memory: Tensor) -> LayerCache:
        keys, values = project_memory(layer.cross_attn, memory)
        empty = keys.new_zeros(keys.shape[0], keys.shape[1], 0, keys.shape[3])
        return LayerCache(empty, empty, keys, values)

    def _decoder_states(self, tgt_in: Tensor, state: TransformerState,
                        need_weights: bool) -> tuple[Tensor, list[Tensor | None]]:
        """``tgt_in [batch, T]`` -> (normed decoder states ``[batch, T, d]``, cross weights per
        layer, None unless ``need_weights``)."""
        y = self._embed(self.tgt_embedding, tgt_in)
        weights = []
        for layer in self.decoder_layers:
            y, w = layer(y, state.memory, state.src_lengths, need_weights=need_weights)
            weights.append(w)
        return self.decoder_norm(y), weights

    def teacher_forced(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor, *,
                       logits: bool = True) -> TeacherForced:
        """The whole teacher-forced pass with what alignment needs: logits, every decoder
        layer's cross-attention and output states, and the encoder memory.

        Args:
            src: ``[batch, S]`` source ids; src_lengths: ``[batch]``.
            tgt_in: ``[batch, T]`` (``<bos>`` then the target).
            logits: compute the output layer (False: ``logits`` is None; over a subword
                vocabulary it costs as much as the rest of the pass).

        Returns:
            A `TeacherForced`.
        """
        check_tokens(src, src_lengths)
        src_lengths = src_lengths.to(src.device)
        x = self._embed(self.src_embedding, src)
        encoder = []
        for layer in self.encoder_layers:
            x, w = layer(x, src_lengths, need_weights=True)
            encoder.append(w)
        memory = self.encoder_norm(x)
        y = self._embed(self.tgt_embedding, tgt_in)
        states, weights = [], []
        for layer in self.decoder_layers:
            y, w = layer(y, memory, src_lengths, need_weights=True)
            states.append(y)
            weights.append(w)
        out = self.out(self.decoder_norm(y)) if logits else None
        return TeacherForced(out, weights, states, memory, encoder)

    def decode(self, tgt_in: Tensor, state: TransformerState,
               need_weights: bool = True) -> tuple[Tensor, list[Tensor | None]]:
        """``tgt_in [batch, T]`` -> ``(logits [batch, T, V], cross weights per layer)``."""
        y, weights = self._decoder_states(tgt_in, state, need_weights)
        return self.out(y), weights

    def decode_step(self, prev_tokens: Tensor, state: TransformerState,
                    need_weights: bool | str = True
                    ) -> tuple[Tensor, TransformerState, Tensor | None]:
        """Feed ``prev_tokens [batch]`` -> (log-probs ``[batch, V]``, new state, weights).

        The weights are the cross-attention of the new position: with ``need_weights=True``
        the last layer's averaged over heads, ``[batch, S]``; with ``"all"`` every layer's and
        head's, ``[batch, layers, heads, S]``; None with False. Incremental when the state has
        a cache.
        """
        if need_weights not in (True, False, "all"):
            raise ValueError(f"need_weights must be True, False or 'all', got {need_weights!r}")
        prefix = torch.cat([state.prefix, prev_tokens.unsqueeze(1)], dim=1)
        if state.cache is None:
            y, weights = self._prefix_step(prefix, state, need_weights)
            cache = None
        else:
            y, cache, weights = self._cached_step(prev_tokens, state, need_weights)
        # Only the new position needs the output projection: over a subword vocabulary it
        # costs as much as the decoder itself.
        logits = self.out(y)
        new_state = TransformerState(state.memory, state.src_lengths, prefix, cache)
        attn = _step_weights(weights, need_weights)
        return torch.log_softmax(logits.float(), dim=-1), new_state, attn

    def _prefix_step(self, prefix: Tensor, state: TransformerState,
                     need_weights: bool | str) -> tuple[Tensor, list[Tensor | None]]:
        """Reference step: the whole prefix through every layer -> (last state ``[batch, d]``,
        each layer's cross weights of the last position ``[batch, heads, S]``, computed in
        the last layer only unless ``need_weights == "all"``)."""
        y = self._embed(self.tgt_embedding, prefix)
        weights = []
        for i, layer in enumerate(self.decoder_layers):
            y, w = layer(y, state.memory, state.src_lengths,
                         need_weights=_layer_wants(need_weights, i, len(self.decoder_layers)))
            weights.append(None if w is None else w[:, :, -1])
        return self.decoder_norm(y[:, -1]), weights

    def _cached_step(self, prev_tokens: Tensor, state: TransformerState,
                     need_weights: bool | str
                     ) -> tuple[Tensor, tuple[LayerCache, ...], list[Tensor | None]]:
        """Incremental step: the new position only -> (state ``[batch, d]``, cache, each
        layer's cross weights ``[batch, heads, S]`` or None)."""
        y = self._embed(self.tgt_embedding, prev_tokens.unsqueeze(1), offset=state.prefix.shape[1])
        src_len = state.memory.shape[1]
        key_mask = (torch.arange(src_len, device=y.device)
                    < state.src_lengths.unsqueeze(1))[:, None, None, :]
        n = len(self.decoder_layers)
        caches, weights = [], []
        for i, (layer, cache) in enumerate(zip(self.decoder_layers, state.cache, strict=True)):
            y, cache, w = layer.step(y, cache, key_mask,
                                     need_weights=_layer_wants(need_weights, i, n))
            caches.append(cache)
            weights.append(None if w is None else w[:, :, -1])
        return self.decoder_norm(y[:, -1]), tuple(caches), weights

    def reorder_state(self, state: TransformerState, index: Tensor) -> TransformerState:
        return state.reorder(index)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                need_weights: bool = False):
        check_teacher_input(src, tgt_in)
        state = self.encode(src, src_lengths, use_cache=False)
        logits, weights = self.decode(tgt_in, state, need_weights=need_weights)
        return (logits, weights) if need_weights else logits


def _layer_wants(need_weights: bool | str, layer: int, layers: int) -> bool:
    """Whether decoder layer ``layer`` computes its cross weights: all layers for ``"all"``,
    the last one for True (the explicit softmax is slower than the fused kernel)."""
    return need_weights == "all" or (bool(need_weights) and layer == layers - 1)


def _step_weights(weights: list[Tensor | None], need_weights: bool | str) -> Tensor | None:
    """Per-layer ``[batch, heads, S]`` -> ``[batch, layers, heads, S]`` ("all"), the last
    layer's head mean ``[batch, S]`` (True), or None."""
    if need_weights == "all":
        return torch.stack(weights, dim=1)
    if need_weights:
        return weights[-1].mean(dim=1)
    return None
