"""Export a trained attnkit Transformer to CTranslate2, and translate with the exported model.

`export_ctranslate2` hands attnkit's weights to CTranslate2's own OpenNMT-py converter and
writes the model folder with a manifest (`check_manifest` refuses a changed file);
`load_translator` and `translate_tokens` translate with it. What is refused and how outputs
compare: docs/guide/translate.md ("CTranslate2").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnkit.decoding import length_batches, max_lengths
from attnkit.errors import CheckpointError, UsageError
from attnkit.fileio import checked_file, file_sha256, read_json_object, staged_folder, write_files
from attnkit.models import TransformerSeq2Seq, build_model, config_from_dict
from attnkit.models.config import TransformerConfig
from attnkit.training.checkpoint import check_state_fits, load_weights

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16")
BATCH_SIZE = 64  # sentences per CTranslate2 batch unless told
MANIFEST = "manifest.json"   # every file's size and sha256, written last and checked first
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which every attnkit LayerNorm uses


def require_ctranslate2() -> ModuleType:
    """The ``ctranslate2`` module, or a one-line `UsageError` saying how to install it."""
    try:
        import ctranslate2
    except ImportError as exc:
        raise UsageError("CTranslate2 is not installed: install the serve extra: "
                         "pip install 'attnkit[serve]'") from exc
    return ctranslate2


class CT2Output(NamedTuple):
    """One translation by CTranslate2: output tokens (no ``<bos>``/``<eos>``) and its score
    (normalised as `translate_tokens` was told)."""

    tokens: list[str]
    score: float


def export_ctranslate2(model_config: dict[str, Any] | TransformerConfig,
                       weights: str | os.PathLike | dict[str, Tensor],
                       src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                       out_dir: str | os.PathLike, *, quantization: str = "int8",
                       files: dict[str, Any] | None = None) -> Path:
    """Write a CTranslate2 model folder ``out_dir`` (new or empty) for an attnkit Transformer
    (``weights``: a ``.safetensors`` file or a state dict; the vocabularies in id order), with
    ``files`` (`attnkit.fileio.write_files`) and its manifest; it appears complete or not at all.
    UsageError: an RNN model, a quantization not in `QUANTIZATIONS`, a non-empty ``out_dir``,
    CTranslate2 missing. CheckpointError: weights or vocabularies that do not fit.
    """
    config = model_config
    if isinstance(config, dict):
        try:
            config = config_from_dict(config)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"bad model config: {exc}") from exc
    if not isinstance(config, TransformerConfig):
        raise UsageError("CTranslate2 export supports Transformer runs only; this run is an RNN "
                         "encoder-decoder (train with --arch transformer)")
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                         f"got {quantization!r}")
    out_dir = Path(out_dir)
    if out_dir.is_symlink() or (out_dir.exists() and (not out_dir.is_dir()
                                                      or any(out_dir.iterdir()))):
        raise UsageError(f"{out_dir}: already exists and is not empty (a file, or a folder with "
                         "files); choose a new folder or remove it")
    for side, tokens, size in (("source", src_tokens, config.src_vocab),
                               ("target", tgt_tokens, config.tgt_vocab)):
        if len(tokens) != size:
            raise CheckpointError(f"the {side} vocabulary has {len(tokens)} tokens, the model "
                                  f"{size}: not the vocabulary these weights were trained with")
        if len(set(tokens)) != len(tokens):
            raise CheckpointError(f"the {side} vocabulary has duplicate tokens")
    if src_tokens[config.unk_id] != tgt_tokens[config.unk_id]:
        raise CheckpointError(f"source and target unknown tokens differ "
                              f"({src_tokens[config.unk_id]!r} vs {tgt_tokens[config.unk_id]!r}); "
                              "CTranslate2 has one")
    ct2 = require_ctranslate2()
    from ctranslate2.converters.opennmt_py import set_transformer_spec

    spec = ct2.specs.TransformerSpec.from_config(
        config.layers, config.heads, pre_norm=True, activation=ct2.specs.Activation.RELU)
    model = build_model(config)
    if isinstance(weights, dict):
        check_state_fits(model.state_dict(), weights, "<state_dict>")
        model.load_state_dict(weights, strict=True)
    else:
        load_weights(model, weights)
    set_transformer_spec(spec, _onmt_variables(model.float().eval()))
    c = spec.config
    c.layer_norm_epsilon, c.add_source_bos, c.add_source_eos = LAYER_NORM_EPS, False, False
    c.bos_token = c.decoder_start_token = tgt_tokens[config.bos_id]
    c.eos_token, c.unk_token = tgt_tokens[config.eos_id], tgt_tokens[config.unk_id]
    spec.register_source_vocabulary(list(src_tokens))
    spec.register_target_vocabulary(list(tgt_tokens))
    spec.validate()
    with staged_folder(out_dir) as tmp:
        spec.optimize(quantization=quantization)
        spec.save(str(tmp))
        write_files(tmp, files or {})
        write_manifest(tmp)
        if out_dir.exists():
            out_dir.rmdir()  # empty (checked above)
        tmp.rename(out_dir)
    return out_dir


def _onmt_variables(model: TransformerSeq2Seq) -> dict[str, Any]:
    """The model's weights (float32 arrays) under the names of an OpenNMT-py checkpoint."""
    c = model.config
    w = {k: v.detach().float().cpu().numpy().copy() for k, v in model.state_dict().items()}
    # [max_len, d_model]: exactly what attnkit adds at positions 0 .. max_len - 1.
    positions = (model.positions.weight if c.positional == "learned"
                 else model.positions.encoding(c.max_len)).detach().float().cpu().numpy()
    out = {"generator.weight": w["out.weight"], "generator.bias": w.get("out.bias")}

    def put(scope: str, name: str) -> None:   # a Linear or a LayerNorm
        out[f"{scope}.weight"], out[f"{scope}.bias"] = w[f"{name}.weight"], w[f"{name}.bias"]

    for side, text, stack, attention in (
            ("encoder", "src", "transformer", {"attn": "self_attn"}),
            ("decoder", "tgt", "transformer_layers",
             {"self_attn": "self_attn", "cross_attn": "context_attn"})):
        out[f"{side}.embeddings.make_embedding.emb_luts.0.weight"] = w[f"{text}_embedding.weight"]
        out[f"{side}.embeddings.make_embedding.pe.pe"] = positions
        put(f"{side}.layer_norm", f"{side}_norm")
        norms = (("layer_norm",) if side == "encoder" else ("layer_norm_1", "layer_norm_2"))
        for i in range(c.layers):
            scope, name = f"{side}.{stack}.{i}", f"{side}_layers.{i}"
            for k, norm in enumerate((*norms, "feed_forward.layer_norm"), 1):
                put(f"{scope}.{norm}", f"{name}.norm{k}")
            put(f"{scope}.feed_forward.w_1", f"{name}.ff.0")
            put(f"{scope}.feed_forward.w_2", f"{name}.ff.3")
            for ours, theirs in attention.items():   # [W_q; W_k; W_v] packed: split
                packed = (w[f"{name}.{ours}.in_proj_weight"], w[f"{name}.{ours}.in_proj_bias"])
                for part, weight, bias in zip(("query", "keys", "values"),
                                              *(np.split(a, 3) for a in packed), strict=True):
                    out[f"{scope}.{theirs}.linear_{part}.weight"] = weight
                    out[f"{scope}.{theirs}.linear_{part}.bias"] = bias
                put(f"{scope}.{theirs}.final_linear", f"{name}.{ours}.out_proj")
    return out


def load_translator(model_dir: str | os.PathLike, *, threads: int = 1, device: str = "cpu",
                    compute_type: str = "default") -> Any:
    """A ``ctranslate2.Translator`` for an exported folder: on CPU ``threads`` workers of one
    thread each (one batch per worker decodes faster than threads sharing a batch), on CUDA
    ``threads`` intra-op threads; ``compute_type="default"`` keeps the stored quantization.
    """
    ct2 = require_ctranslate2()
    workers, intra = (threads, 1) if device == "cpu" else (1, threads)
    # Building a translator sets the calling thread's OpenMP thread count to `intra_threads`,
    # and torch reads its own from there (attnkit decoding in the same process then ran on one
    # thread, a quarter slower at beam 5 on a 2-core CPU). That count belongs to the thread
    # that calls, so the translator is built on a thread of its own and no setting of the
    # caller's changes.
    with ThreadPoolExecutor(1) as builder:
        return builder.submit(ct2.Translator, str(model_dir), device=device,
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
    # Submitted together (asynchronous), the batches keep every worker of the translator busy.
    pending = [(idx, translator.translate_batch(
        [list(sources[i]) for i in idx], beam_size=beam, length_penalty=length_penalty,
        max_decoding_length=max(limits[i] for i in idx), return_scores=True, asynchronous=True))
        for idx in length_batches(lengths, batch_size=batch_size or BATCH_SIZE)]
    best = {i: r.result() for idx, results in pending for i, r in zip(idx, results, strict=True)}
    return [CT2Output(list(best[i].hypotheses[0])[: limits[i]], float(best[i].scores[0]))
            for i in range(len(sources))]


# A CTranslate2 folder is loaded by a C++ library that trusts its bytes: the manifest refuses
# any file that differs from what the export wrote.
def write_manifest(folder: Path) -> None:
    """``folder/manifest.json``: ``{"format": 1, "files": {name: {"bytes", "sha256"}}}`` of
    every file in ``folder`` (sub-folders included)."""
    files = {str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    write_files(folder, {MANIFEST: {"format": 1, "files": files}})


def check_manifest(folder: Path) -> None:
    """Check every file the manifest lists (present, same size, same sha256). CheckpointError: no
    manifest, a missing or changed file, a broken manifest."""
    if not (folder / MANIFEST).exists():
        raise CheckpointError(f"{folder}: no {MANIFEST}, so its files cannot be checked; export "
                              "the run again")
    manifest = read_json_object(folder / MANIFEST, "the export's manifest", root=folder)
    files = manifest.get("files")
    if manifest.get("format") != 1 or not isinstance(files, dict) or not files:
        raise CheckpointError(f"{folder / MANIFEST}: not a manifest attnkit wrote")
    for name, want in sorted(files.items()):
        if not isinstance(want, dict) or "/.." in f"/{name}" or name.startswith("/"):
            raise CheckpointError(f"{folder / MANIFEST}: a bad entry {name!r}")
        path = checked_file(folder / name, "a file of the export", root=folder, limit=None)
        if path.stat().st_size != want.get("bytes") or file_sha256(path) != want.get("sha256"):
            raise CheckpointError(f"{path}: changed since the export (its size or sha256 is not "
                                  f"the manifest's); export the run again")
