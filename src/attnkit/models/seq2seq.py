"""The RNN encoder-decoder for translation (`RNNSeq2Seq`): training forward + the step API.

`RNNEncoder` runs a (bi)GRU/LSTM over packed sequences; `RNNDecoder` advances one token per
call, ``"bahdanau"`` (attending from the previous state) or ``"luong"`` (from the new one, with
input feeding), with any attnkit score (its memory computed once per source) or none. The
equations: docs/concepts.md ("The RNN decoder")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnkit.attention import factory
from attnkit.attention.base import AttentionMemory
from attnkit.models.config import RNNSeq2SeqConfig
from attnkit.models.step import (
    StepOutput,
    Weights,
    check_targets,
    check_tokens,
    check_weights,
    stacked_steps,
)

RNNState = Tensor | tuple[Tensor, Tensor]  # GRU: h; LSTM: (h, c), each [layers, batch, hidden]
# Mechanisms whose score is a plain dot product of query and key (no learned projection).
# (The local kinds wrap the factory's default "general" score, which takes any sizes.)
EQUAL_DIM_KINDS = {"dot", "scaled_dot"}


class RNNEncoder(nn.Module):
    """Embedding + multi-layer (bi)directional GRU/LSTM of an `RNNSeq2SeqConfig`.

    ``encoder(src [batch, S], src_lengths [batch])`` -> ``(outputs [batch, S, hidden * dirs],
    state)``, padded outputs zero; ``state [layers, batch, hidden]`` (``(h, c)`` for LSTM) is
    ``tanh(W [h_fwd; h_bwd])`` per layer.
    """

    def __init__(self, c: RNNSeq2SeqConfig):
        super().__init__()
        self.cell, self.layers = c.cell, c.layers
        self.directions = 2 if c.bidirectional else 1
        self.out_dim = c.hidden * self.directions
        self.embedding = nn.Embedding(c.src_vocab, c.emb_dim, padding_idx=c.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        rnn_cls = nn.LSTM if c.cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(c.emb_dim, c.hidden, num_layers=c.layers, batch_first=True,
                           bidirectional=c.bidirectional,
                           dropout=c.dropout if c.layers > 1 else 0.0)
        self.bridge_h = nn.Linear(self.out_dim, c.hidden)
        self.bridge_c = nn.Linear(self.out_dim, c.hidden) if c.cell == "lstm" else None

    def _merge_directions(self, h: Tensor) -> Tensor:
        # [layers * dirs, batch, hidden] -> [layers, batch, dirs * hidden]
        h = h.view(self.layers, self.directions, h.shape[1], -1)
        return torch.cat([h[:, d] for d in range(self.directions)], dim=-1)

    def forward(self, src: Tensor, src_lengths: Tensor,
                embedded: Tensor | None = None) -> tuple[Tensor, RNNState]:
        """``src [batch, S]`` -> (outputs ``[batch, S, out_dim]``, the decoder's initial state);
        ``embedded [batch, S, emb_dim]`` replaces ``self.embedding(src)``."""
        check_tokens(src, src_lengths)
        emb = self.dropout(self.embedding(src) if embedded is None else embedded)
        packed = pack_padded_sequence(emb, src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, final = self.rnn(packed)
        outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        if self.cell == "lstm":
            h, c = final
            state: RNNState = (torch.tanh(self.bridge_h(self._merge_directions(h))),
                               self.bridge_c(self._merge_directions(c)))
        else:
            state = torch.tanh(self.bridge_h(self._merge_directions(final)))
        return outputs, state


def _select(state: RNNState, index: Tensor) -> RNNState:
    if isinstance(state, tuple):
        return tuple(s.index_select(1, index) for s in state)  # type: ignore[return-value]
    return state.index_select(1, index)


def _top(state: RNNState) -> Tensor:
    return (state[0] if isinstance(state, tuple) else state)[-1]


@dataclass
class RNNDecoderState:
    """What the decoder carries between steps (rows: ``beams`` per sentence): ``hidden``
    ``[layers, rows, hidden]`` (a pair for LSTM); the attention ``memory`` of each sentence
    (None without attention), else the fixed ``context [sentences, hidden]``; Luong's input
    ``feed`` ``[rows, hidden]``; the encoder output ``source [sentences, S, enc_dim]``; ``step``,
    the next target position (local-m's centre); ``cached``: reuse the key projection."""

    hidden: RNNState
    memory: AttentionMemory | None
    feed: Tensor | None
    context: Tensor | None
    source: Tensor
    src_lengths: Tensor
    step: int = 0
    cached: bool = True
    encoder_weights: None = None


class RNNDecoder(nn.Module):
    """The GRU/LSTM decoder of an `RNNSeq2SeqConfig` over encoder outputs of ``enc_dim``.

    ``init_state(enc_out [batch, S, enc_dim], src_lengths, enc_state, beams, use_cache)`` ->
    `RNNDecoderState`; ``step(prev_tokens [batch], state)`` -> ``(logits [batch, vocab], state,
    weights [batch, S] or None)``.
    """

    def __init__(self, c: RNNSeq2SeqConfig, enc_dim: int):
        super().__init__()
        self.style, self.hidden = c.style, c.hidden
        # Luong's local-m aligns target step t with source position t: the step is passed on.
        self.monotonic = c.attention == "local-m"
        self.embedding = nn.Embedding(c.tgt_vocab, c.emb_dim, padding_idx=c.pad_id)
        self.dropout = nn.Dropout(c.dropout)
        self.key_proj: nn.Module | None = None
        self.attention = None
        ctx_dim = c.hidden
        if c.attention != "none":
            key_dim = ctx_dim = enc_dim
            if c.attention in EQUAL_DIM_KINDS and enc_dim != c.hidden:
                self.key_proj = nn.Linear(enc_dim, c.hidden, bias=False)
                key_dim = c.hidden
            self.attention = factory.create(c.attention, c.hidden, key_dim,
                                            units=c.attention_units, window=c.window)
        # Bahdanau feeds the context with the embedding; Luong feeds h~_{t-1} (input feeding).
        rnn_in = c.emb_dim + (ctx_dim if c.style == "bahdanau" else c.hidden)
        rnn_cls = nn.LSTM if c.cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(rnn_in, c.hidden, num_layers=c.layers, batch_first=True,
                           dropout=c.dropout if c.layers > 1 else 0.0)
        # Bahdanau reads out [s; c; e], Luong W_c of h~ = tanh(W_c [c; h]).
        self.readout = nn.Linear(ctx_dim + c.hidden + (c.emb_dim if c.style == "bahdanau" else 0),
                                 c.hidden)
        self.out = nn.Linear(c.hidden, c.tgt_vocab)

    def init_state(self, enc_out: Tensor, src_lengths: Tensor, enc_state: RNNState,
                   beams: int = 1, use_cache: bool = True) -> RNNDecoderState:
        """The state before the first step, ``beams`` rows per sentence."""
        memory = context = None
        if self.attention is not None:
            keys = enc_out if self.key_proj is None else self.key_proj(enc_out)
            memory = self.attention.memory(keys, enc_out, key_lengths=src_lengths)
        else:
            context = _top(enc_state)
        if beams > 1:
            enc_state = _select(enc_state, torch.arange(
                enc_out.shape[0], device=enc_out.device).repeat_interleave(beams))
        feed = enc_out.new_zeros(enc_out.shape[0] * beams, self.hidden) \
            if self.style == "luong" else None
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
            readout = torch.tanh(self.readout(torch.cat([out[:, 0], context, emb], -1)))
        else:
            out, hidden = self.rnn(torch.cat([emb, state.feed], -1).unsqueeze(1), state.hidden)
            h = out[:, 0]
            context, weights = self._attend(h, state)
            readout = torch.tanh(self.readout(torch.cat([context, h], -1)))
        logits = self.out(self.dropout(readout))
        new_state = dataclasses.replace(state, hidden=hidden, step=state.step + 1,
                                        feed=readout if self.style == "luong" else None)
        return logits, new_state, weights if need_weights else None


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder with (or without) attention, built from an `RNNSeq2SeqConfig`.

    ``model(src [batch, S], src_lengths [batch], tgt_in [batch, T], need_weights=False)`` ->
    ``logits [batch, T, tgt_vocab]`` (and attention ``[batch, T, S]`` or None).
    """

    def __init__(self, config: RNNSeq2SeqConfig):
        super().__init__()
        self.config = config
        self.encoder = RNNEncoder(config)
        self.decoder = RNNDecoder(config, self.encoder.out_dim)

    @property
    def source_embedding(self) -> nn.Embedding:
        """The table the source tokens are looked up in."""
        return self.encoder.embedding

    def encode(self, src: Tensor, src_lengths: Tensor, *, beams: int = 1,
               use_cache: bool = True, weights: Weights = "none",
               embedded: Tensor | None = None) -> RNNDecoderState:
        """The encoder and the attention memory once per sentence: the decoder's initial state
        (the step API); ``embedded`` replaces the looked-up source vectors.
        """
        check_weights(weights)
        enc_out, enc_state = self.encoder(src, src_lengths, embedded)
        return self.decoder.init_state(enc_out, src_lengths.to(enc_out.device), enc_state,
                                       beams=beams, use_cache=use_cache)

    def step(self, tokens: Tensor, state: RNNDecoderState, *, weights: Weights = "none",
             logits: bool = True) -> StepOutput:
        """Feed ``tokens [rows, t]`` one position at a time (the step API); ``"all"`` is ``[rows,
        t, 1, 1, S]``.
        """
        check_weights(weights)
        scores, attn = [], []
        for i in range(tokens.shape[1]):
            step_logits, state, w = self.decoder.step(tokens[:, i], state, weights != "none")
            scores.append(step_logits)
            attn.append(w)
        return stacked_steps(scores, attn, state, weights, logits)

    def reorder(self, state: RNNDecoderState, rows: Tensor,
                sentences: Tensor | None = None) -> RNNDecoderState:
        """Keep rows ``rows`` and, when some finished, the sentences ``sentences``."""
        out = dataclasses.replace(state, hidden=_select(state.hidden, rows), feed=None
                                  if state.feed is None else state.feed.index_select(0, rows))
        if sentences is not None:
            out.memory = None if state.memory is None else state.memory.reorder(sentences)
            out.context = None if state.context is None else state.context[sentences]
            out.source, out.src_lengths = state.source[sentences], state.src_lengths[sentences]
        return out

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                need_weights: bool = False):
        check_targets(src, tgt_in)
        state = self.encode(src, src_lengths, beams=1, use_cache=True, weights="none")
        ratio = self.config.teacher_forcing_ratio
        sample = self.training and ratio < 1.0
        logits_steps, weight_steps = [], []
        for t in range(tgt_in.shape[1]):
            prev = tgt_in[:, t]
            if sample and t > 0:
                own = logits_steps[-1].argmax(-1)
                gold = torch.rand(prev.shape, device=prev.device) < ratio
                prev = torch.where(gold, prev, own)
            logits, state, weights = self.decoder.step(prev, state)
            logits_steps.append(logits)
            if need_weights and weights is not None:
                weight_steps.append(weights)
        logits = torch.stack(logits_steps, dim=1)
        weights = torch.stack(weight_steps, dim=1) if weight_steps else None
        return (logits, weights) if need_weights else logits
