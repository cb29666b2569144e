"""Export a trained attnkit Transformer to CTranslate2, and translate with the exported model.

`export_ctranslate2` fills CTranslate2's ``TransformerSpec`` from an attnkit model config and
weights (as its OpenNMT-py and fairseq converters do) and writes the model folder;
`load_translator` and `translate_tokens` translate with it. What is exported, what is refused
and how outputs compare with attnkit's: docs/guide/translate.md ("CTranslate2").
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

from attnkit.ct2_export.manifest import write_manifest
from attnkit.decoding import length_batches, max_lengths
from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import write_files
from attnkit.models import TransformerSeq2Seq, build_model, config_from_dict
from attnkit.models.config import RNNSeq2SeqConfig, TransformerConfig
from attnkit.training.checkpoint import check_state_fits, load_weights

INSTALL_HINT = "install the serve extra: pip install 'attnkit[serve]'"
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16")
BATCH_SIZE = 64  # sentences per CTranslate2 batch unless told
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which every attnkit LayerNorm uses


def require_ctranslate2() -> ModuleType:
    """The ``ctranslate2`` module, or a one-line `UsageError` saying how to install it."""
    try:
        import ctranslate2
    except ImportError as exc:
        raise UsageError(f"CTranslate2 is not installed: {INSTALL_HINT}") from exc
    return ctranslate2


@dataclass
class CT2Output:
    """One translation by CTranslate2: output tokens (no ``<bos>``/``<eos>``) and its score
    (normalised as `translate_tokens` was told)."""

    tokens: list[str]
    score: float


def _transformer_config(model_config: Any) -> TransformerConfig:
    if isinstance(model_config, dict):
        try:
            model_config = config_from_dict(model_config)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"bad model config: {exc}") from exc
    if isinstance(model_config, RNNSeq2SeqConfig):
        raise UsageError("CTranslate2 export supports Transformer runs only; this run is an RNN "
                         "encoder-decoder (train with --arch transformer)")
    if not isinstance(model_config, TransformerConfig):
        raise UsageError(f"expected a TransformerConfig or its dict, got "
                         f"{type(model_config).__name__}")
    return model_config


def _load_model(config: TransformerConfig, weights: str | os.PathLike | dict[str, Tensor]
                ) -> TransformerSeq2Seq:
    model = build_model(config)
    if isinstance(weights, dict):
        check_state_fits(model.state_dict(), weights, "<state_dict>")
        model.load_state_dict(weights, strict=True)
    else:
        load_weights(model, weights)
    return model.float().eval()


def _check_vocab(config: TransformerConfig, src_tokens: Sequence[str],
                 tgt_tokens: Sequence[str]) -> dict[str, str]:
    """The special token strings; CheckpointError when the vocabularies do not fit."""
    for side, tokens, size in (("source", src_tokens, config.src_vocab),
                               ("target", tgt_tokens, config.tgt_vocab)):
        if len(tokens) != size:
            raise CheckpointError(f"the {side} vocabulary has {len(tokens)} tokens, the model "
                                  f"{size}: not the vocabulary these weights were trained with")
        if len(set(tokens)) != len(tokens):
            raise CheckpointError(f"the {side} vocabulary has duplicate tokens")
    specials = {"bos_token": tgt_tokens[config.bos_id], "eos_token": tgt_tokens[config.eos_id],
                "unk_token": tgt_tokens[config.unk_id]}
    if src_tokens[config.unk_id] != specials["unk_token"]:
        raise CheckpointError(f"source and target unknown tokens differ "
                              f"({src_tokens[config.unk_id]!r} vs {specials['unk_token']!r}); "
                              "CTranslate2 has one")
    return specials


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.is_symlink() or (out_dir.exists() and (not out_dir.is_dir()
                                                      or any(out_dir.iterdir()))):
        raise UsageError(f"{out_dir}: already exists and is not empty (a file, or a folder with "
                         "files); choose a new folder or remove it")


def export_ctranslate2(model_config: dict[str, Any] | TransformerConfig,
                       weights: str | os.PathLike | dict[str, Tensor],
                       src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                       out_dir: str | os.PathLike, *, quantization: str = "int8",
                       files: dict[str, Any] | None = None) -> Path:
    """Write a CTranslate2 model folder for an attnkit Transformer, with its manifest
    (`attnkit.ct2_export.manifest`); the folder appears complete or not at all.

    Args:
        model_config: a ``TransformerConfig`` or its ``to_dict()`` (``config.json["model"]``).
        weights: a ``.safetensors`` file written by attnkit, or a state dict.
        src_tokens, tgt_tokens: the vocabularies in id order (``Vocab.itos``).
        out_dir: the folder to create (it may exist if empty).
        quantization: one of `QUANTIZATIONS`.
        files: other files the folder holds, by name (`attnkit.fileio.write_files`).

    Raises:
        UsageError: an RNN model, an unknown quantization, a non-empty ``out_dir``, or
            CTranslate2 not installed. CheckpointError: weights or vocabularies that do not fit.
    """
    config = _transformer_config(model_config)
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                         f"got {quantization!r}")
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    specials = _check_vocab(config, src_tokens, tgt_tokens)
    ct2 = require_ctranslate2()
    model = _load_model(config, weights)
    spec = _model_spec(ct2, model, list(src_tokens), list(tgt_tokens), specials)

    class _Converter(ct2.converters.Converter):
        def _load(self):
            return spec

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _Converter().convert(str(tmp), quantization=quantization, force=True)
        write_files(tmp, files or {})
        write_manifest(tmp)
        if out_dir.exists():
            out_dir.rmdir()  # empty (checked above)
        tmp.rename(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out_dir


def _model_spec(ct2: ModuleType, model: TransformerSeq2Seq, src_tokens: list[str],
                tgt_tokens: list[str], specials: dict[str, str]) -> Any:
    """A filled ``ctranslate2.specs.TransformerSpec`` for ``model``."""
    c = model.config
    spec = ct2.specs.TransformerSpec.from_config(
        c.layers, c.heads, pre_norm=True, activation=ct2.specs.Activation.RELU)
    positions = _position_table(model)
    _set_stack(spec.encoder, model.src_embedding, positions, model.encoder_norm)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.attn, layer.norm1, self_attention=True)
        _set_ffn(layer_spec.ffn, layer.ff, layer.norm2)
    _set_stack(spec.decoder, model.tgt_embedding, positions, model.decoder_norm)
    _set_linear(spec.decoder.projection, model.out.weight, model.out.bias)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.norm1,
                       self_attention=True)
        _set_attention(layer_spec.attention, layer.cross_attn, layer.norm2, self_attention=False)
        _set_ffn(layer_spec.ffn, layer.ff, layer.norm3)
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.config.bos_token = specials["bos_token"]
    spec.config.eos_token = specials["eos_token"]
    spec.config.unk_token = specials["unk_token"]
    spec.config.decoder_start_token = specials["bos_token"]
    spec.config.add_source_bos = spec.config.add_source_eos = False
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    return spec


def _np(t: Tensor) -> Any:
    return t.detach().float().cpu().numpy().copy()


def _position_table(model: TransformerSeq2Seq) -> Tensor:
    """``[max_len, d_model]``: exactly what attnkit adds at positions ``0 .. max_len - 1``."""
    c = model.config
    if c.positional == "learned":
        return model.positions.weight
    return model.positions.encoding(c.max_len)


def _set_stack(spec: Any, embedding: torch.nn.Embedding, positions: Tensor,
               final_norm: torch.nn.LayerNorm) -> None:
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _np(embedding.weight)
    spec.scale_embeddings = True  # sqrt(d_model), as TransformerSeq2Seq._embed
    spec.position_encodings.encodings = _np(positions)
    _set_norm(spec.layer_norm, final_norm)


def _set_norm(spec: Any, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _set_linear(spec: Any, weight: Tensor, bias: Tensor | None) -> None:
    spec.weight = _np(weight)
    if bias is not None:
        spec.bias = _np(bias)


def _set_attention(spec: Any, mha: Any, norm: torch.nn.LayerNorm, *, self_attention: bool
                   ) -> None:
    """Packed ``[W_q; W_k; W_v]`` is CTranslate2's fused self-attention input projection; for
    cross-attention it is split into the query and the fused key/value projections."""
    _set_norm(spec.layer_norm, norm)
    w, b, d = mha.in_proj_weight, mha.in_proj_bias, mha.inner_dim
    if self_attention:
        _set_linear(spec.linear[0], w, b)
    else:
        _set_linear(spec.linear[0], w[:d], b[:d])
        _set_linear(spec.linear[1], w[d:], b[d:])
    _set_linear(spec.linear[-1], mha.out_proj.weight, mha.out_proj.bias)


def _set_ffn(spec: Any, ff: torch.nn.Sequential, norm: torch.nn.LayerNorm) -> None:
    _set_norm(spec.layer_norm, norm)
    _set_linear(spec.linear_0, ff[0].weight, ff[0].bias)
    _set_linear(spec.linear_1, ff[3].weight, ff[3].bias)


def load_translator(model_dir: str | os.PathLike, *, threads: int = 1, device: str = "cpu",
                    compute_type: str = "default") -> Any:
    """A ``ctranslate2.Translator`` for an exported folder: on CPU ``threads`` workers of one
    thread each (one batch per worker decodes faster than threads sharing a batch), on CUDA
    ``threads`` intra-op threads; ``compute_type="default"`` keeps the stored quantization.
    """
    ct2 = require_ctranslate2()
    path = Path(model_dir)
    if not (path / "model.bin").is_file():
        raise CheckpointError(f"{path}: not a CTranslate2 model folder (model.bin is missing); "
                              "create it with `attnkit translate export`")
    workers, intra = (threads, 1) if device == "cpu" else (1, threads)
    # Building a translator sets the calling thread's OpenMP thread count to `intra_threads`,
    # and torch reads its own from there (attnkit decoding in the same process then ran on one
    # thread, a quarter slower at beam 5 on a 2-core CPU). That count belongs to the thread
    # that calls, so the translator is built on a thread of its own and no setting of the
    # caller's changes.
    with ThreadPoolExecutor(1) as builder:
        return builder.submit(ct2.Translator, str(path), device=device,
                              compute_type=compute_type, inter_threads=workers,
                              intra_threads=intra).result()


def translate_tokens(translator: Any, sources: Sequence[Sequence[str]], *, beam: int = 1,
                     length_penalty: float | None = None, max_len_ratio: float = 2.0,
                     max_len_offset: int = 5, max_len: int | None = 200,
                     batch_size: int | None = None) -> list[CT2Output]:
    """Translate source token lists (without ``<bos>``/``<eos>``): one `CT2Output` per source.

    ``length_penalty`` is CTranslate2's ``score / length ** penalty`` (None: 0 for greedy, 1 for
    beams). ``max_len_ratio``, ``max_len_offset``, ``max_len`` are attnkit's per-sentence limit
    (`attnkit.decoding.max_lengths`): CTranslate2 takes one per call, so sentences go in batches
    of similar length and each output is cut at its own limit. ``batch_size`` None: `BATCH_SIZE`.
    """
    if length_penalty is None:
        length_penalty = 0.0 if beam == 1 else 1.0
    lengths = [len(s) for s in sources]
    limits = max_lengths(torch.tensor(lengths), max_len_ratio, max_len_offset, max_len)
    out: list[CT2Output | None] = [None] * len(sources)
    # Submitted together (asynchronous), the batches keep every worker of the translator busy.
    pending = [(idx, translator.translate_batch(
        [list(sources[i]) for i in idx], beam_size=beam, length_penalty=length_penalty,
        max_decoding_length=max(limits[i] for i in idx), return_scores=True, asynchronous=True))
        for idx in length_batches(lengths, batch_size=batch_size or BATCH_SIZE)]
    for idx, results in pending:
        for i, r in zip(idx, results, strict=True):
            best = r.result()
            out[i] = CT2Output(list(best.hypotheses[0])[: limits[i]], float(best.scores[0]))
    return out  # type: ignore[return-value]
