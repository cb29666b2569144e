"""RNN encoder-decoder for translation: training forward + the step API decoders use.

Every translation model in attnkit (this one and `TransformerSeq2Seq`) has the step API of
`attnkit.models.step` (``encode``, ``step``, ``reorder``), which is all `attnkit.decoding`
relies on, plus ``forward(src [B, S], src_lengths [B], tgt_in [B, T]) -> logits [B, T, V]`` for
training and ``config`` with ``pad_id``, ``bos_id``, ``eos_id``, ``unk_id`` and ``to_dict()``.

Example:
    ```python
    cfg = RNNSeq2SeqConfig(src_vocab=100, tgt_vocab=120, attention="general", style="luong")
    model = RNNSeq2Seq(cfg)
    logits = model(src, src_lengths, tgt_in)          # [batch, T, 120]
    ```
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.attention.base import ScoreAttention
from attnkit.models.config import RNNSeq2SeqConfig
from attnkit.models.rnn_decoder import RNNDecoder, RNNDecoderState
from attnkit.models.rnn_encoder import RNNEncoder, check_teacher_input
from attnkit.models.step import StepOutput, Weights, check_weights, stacked_steps


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder with (or without) attention, built from an `RNNSeq2SeqConfig`.

    ``model(src [batch, S], src_lengths [batch], tgt_in [batch, T], need_weights=False)`` ->
    ``logits [batch, T, tgt_vocab]`` (and attention ``[batch, T, S]`` or None).
    ``attention_module``: a custom `ScoreAttention` for the decoder.
    """

    def __init__(self, config: RNNSeq2SeqConfig, attention_module: ScoreAttention | None = None):
        super().__init__()
        self.config = config
        c = config
        self.encoder = RNNEncoder(c.src_vocab, c.emb_dim, c.hidden, c.layers, c.cell,
                                  c.bidirectional, c.dropout, dec_hidden=c.hidden,
                                  pad_id=c.pad_id)
        self.decoder = RNNDecoder(c.tgt_vocab, c.emb_dim, c.hidden, self.encoder.out_dim,
                                  c.layers, c.cell, c.style, c.attention, c.attention_units,
                                  c.window, c.dropout, c.pad_id, attention_module)

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
        return state.reorder(rows, sentences)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor,
                need_weights: bool = False):
        check_teacher_input(src, tgt_in)
        state = self.encode(src, src_lengths, beams=1, use_cache=True, weights="none")
        ratio = self.config.teacher_forcing_ratio
        sample = self.training and ratio < 1.0
        logits_steps: list[Tensor] = []
        weight_steps: list[Tensor] = []
        prev = tgt_in[:, 0]
        for t in range(tgt_in.shape[1]):
            if t > 0:
                prev = tgt_in[:, t]
                if sample:
                    own = logits_steps[-1].argmax(-1)
                    gold = torch.rand(prev.shape, device=prev.device) < ratio
                    prev = torch.where(gold, prev, own)
            logits, state, weights = self.decoder.step(prev, state)
            logits_steps.append(logits)
            if need_weights and weights is not None:
                weight_steps.append(weights)
        logits = torch.stack(logits_steps, dim=1)
        if not need_weights:
            return logits
        return logits, (torch.stack(weight_steps, dim=1) if weight_steps else None)
