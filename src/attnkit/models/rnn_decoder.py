"""The RNN decoder, one step at a time, in both classic styles (or without attention).

``style="bahdanau"`` attends from the previous state, ``style="luong"`` from the new one with
input feeding; ``attention="none"`` is the fixed-length baseline. Any attnkit score mechanism
works (`attnkit.attention.factory.create`); the memory is computed once per source in
`RNNDecoder.init_state` and shared by a sentence's beams. The equations: docs/concepts.md
("The RNN decoder").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.attention import factory
from attnkit.attention.base import AttentionMemory, ScoreAttention
from attnkit.models.rnn_encoder import RNNState

# Mechanisms whose score is a plain dot product of query and key (no learned projection).
# (The local kinds wrap the factory's default "general" score, which takes any sizes.)
EQUAL_DIM_KINDS = {"dot", "scaled_dot"}


def _select(state: RNNState, index: Tensor) -> RNNState:
    if isinstance(state, tuple):
        return tuple(s.index_select(1, index) for s in state)  # type: ignore[return-value]
    return state.index_select(1, index)


def _top(state: RNNState) -> Tensor:
    h = state[0] if isinstance(state, tuple) else state
    return h[-1]


@dataclass
class RNNDecoderState:
    """Everything the decoder carries between steps (rows: ``beams`` per sentence).

    Attributes:
        hidden: ``[layers, rows, hidden]`` (a pair for LSTM).
        memory: the attention memory, one per sentence, or None for ``attention="none"``.
        feed: Luong input feeding ``h~_{t-1}`` ``[rows, hidden]``, else None.
        context: the fixed context ``[sentences, hidden]`` of the no-attention baseline, else None.
        source, src_lengths: the encoder output ``[sentences, S, enc_dim]``, ``[sentences]``.
        step: index of the next target position (local-m centres its window on it).
        cached: reuse the memory's key projection (False: the reference path recomputes it).
        encoder_weights: always None.
    """

    hidden: RNNState
    memory: AttentionMemory | None
    feed: Tensor | None
    context: Tensor | None
    source: Tensor
    src_lengths: Tensor
    step: int = 0
    cached: bool = True
    encoder_weights: None = None

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> RNNDecoderState:
        """Keep rows ``rows`` and, when some finished, the sentences ``sentences``."""
        keep = sentences is not None
        return RNNDecoderState(
            _select(self.hidden, rows),
            self.memory.reorder(sentences) if keep and self.memory is not None else self.memory,
            None if self.feed is None else self.feed.index_select(0, rows),
            self.context.index_select(0, sentences) if keep and self.context is not None
            else self.context,
            self.source.index_select(0, sentences) if keep else self.source,
            self.src_lengths.index_select(0, sentences) if keep else self.src_lengths,
            self.step,
            self.cached,
        )


class RNNDecoder(nn.Module):
    """A GRU/LSTM decoder with attention, advanced one token per call.

    Args:
        vocab, emb_dim, hidden: target vocabulary, embedding and hidden sizes.
        enc_dim: encoder output size (``2 * hidden_enc`` when bidirectional).
        layers, cell, dropout, pad_id: as the encoder.
        style: ``"bahdanau"`` or ``"luong"``.
        attention, attention_units, window: a score kind for the factory (or ``"none"``).
        attention_module: a `ScoreAttention` to use instead (queries ``hidden``, keys ``enc_dim``).

    ``init_state(enc_out [batch, S, enc_dim], src_lengths, enc_state, beams, use_cache)`` ->
    `RNNDecoderState`; ``step(prev_tokens [batch], state)`` -> ``(logits [batch, vocab], state,
    weights [batch, S] or None)``.
    """

    def __init__(self, vocab: int, emb_dim: int, hidden: int, enc_dim: int, layers: int = 1,
                 cell: str = "gru", style: str = "bahdanau", attention: str = "additive",
                 attention_units: int | None = None, window: int = 5, dropout: float = 0.0,
                 pad_id: int = 0, attention_module: ScoreAttention | None = None):
        super().__init__()
        self.style = style
        self.hidden = hidden
        self.use_attention = attention != "none"
        # Luong's local-m aligns target step t with source position t: the step is passed on.
        self.monotonic = attention == "local-m"
        self.embedding = nn.Embedding(vocab, emb_dim, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.key_proj: nn.Module | None = None
        if self.use_attention:
            key_dim = enc_dim
            if attention_module is None and attention in EQUAL_DIM_KINDS and enc_dim != hidden:
                self.key_proj = nn.Linear(enc_dim, hidden, bias=False)
                key_dim = hidden
            self.attention = attention_module or factory.create(
                attention, hidden, key_dim, units=attention_units, window=window)
            ctx_dim = enc_dim
        else:
            self.attention = None
            ctx_dim = hidden
        # Bahdanau feeds the context with the embedding; Luong feeds h~_{t-1} (input feeding).
        rnn_in = emb_dim + (ctx_dim if style == "bahdanau" else hidden)
        rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(rnn_in, hidden, num_layers=layers, batch_first=True,
                           dropout=dropout if layers > 1 else 0.0)
        if style == "bahdanau":
            self.readout = nn.Linear(hidden + ctx_dim + emb_dim, hidden)
        else:
            self.readout = nn.Linear(ctx_dim + hidden, hidden)  # W_c of h~ = tanh(W_c [c; h])
        self.out = nn.Linear(hidden, vocab)

    def init_state(self, enc_out: Tensor, src_lengths: Tensor, enc_state: RNNState,
                   beams: int = 1, use_cache: bool = True) -> RNNDecoderState:
        """The state before the first step, ``beams`` rows per sentence."""
        memory = None
        context = None
        if self.attention is not None:
            keys = enc_out if self.key_proj is None else self.key_proj(enc_out)
            memory = self.attention.memory(keys, enc_out, key_lengths=src_lengths)
        else:
            context = _top(enc_state)
        if beams > 1:
            enc_state = _select(enc_state, torch.arange(
                enc_out.shape[0], device=enc_out.device).repeat_interleave(beams))
        feed = None
        if self.style == "luong":
            feed = enc_out.new_zeros(enc_out.shape[0] * beams, self.hidden)
        return RNNDecoderState(enc_state, memory, feed, context, enc_out, src_lengths,
                               cached=use_cache)

    def _attend(self, query: Tensor, state: RNNDecoderState) -> tuple[Tensor, Tensor | None]:
        """``query [rows, hidden]`` -> (context ``[rows, ctx_dim]``, weights ``[rows, S]``):
        the rows of a sentence are its queries over its one memory."""
        sentences = state.source.shape[0]
        per = query.shape[0] // sentences
        if state.memory is None:
            return state.context.repeat_interleave(per, dim=0), None  # type: ignore[union-attr]
        memory = state.memory
        if not state.cached:
            memory = self.attention.memory(memory.raw_keys, memory.values,
                                           key_mask=memory.key_mask)
        extra = {}
        if self.monotonic:
            extra["query_positions"] = torch.full((sentences, per), state.step,
                                                  device=query.device)
        out = self.attention.attend(query.view(sentences, per, -1), memory, need_weights=True,
                                    **extra)
        return out.context.reshape(query.shape[0], -1), out.weights.reshape(query.shape[0], -1)

    def step(self, prev_tokens: Tensor, state: RNNDecoderState,
             need_weights: bool = True) -> tuple[Tensor, RNNDecoderState, Tensor | None]:
        # Score attention computes its weights anyway (they give the context); need_weights
        # only decides whether they are returned.
        emb = self.dropout(self.embedding(prev_tokens))
        if self.style == "bahdanau":
            context, weights = self._attend(_top(state.hidden), state)
            out, hidden = self.rnn(torch.cat([emb, context], -1).unsqueeze(1), state.hidden)
            s = out[:, 0]
            readout = torch.tanh(self.readout(torch.cat([s, context, emb], -1)))
            feed = None
        else:
            out, hidden = self.rnn(torch.cat([emb, state.feed], -1).unsqueeze(1), state.hidden)
            h = out[:, 0]
            context, weights = self._attend(h, state)
            readout = torch.tanh(self.readout(torch.cat([context, h], -1)))
            feed = readout
        logits = self.out(self.dropout(readout))
        new_state = RNNDecoderState(hidden, state.memory, feed, state.context, state.source,
                                    state.src_lengths, state.step + 1, state.cached)
        return logits, new_state, weights if need_weights else None
