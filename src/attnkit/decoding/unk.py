"""Unknown-word replacement from attention (Luong et al. 2015, "Addressing the Rare Word
Problem"): every ``<unk>`` in the output becomes the source word it attended to most.

Proper names and numbers are usually copied verbatim in translation, so the most attended
source word is a good guess for a word outside the target vocabulary.

Example:
    ```python
    replace_unk(["je", "suis", "<unk>"], attention, ["I", "am", "Zorblax"])
    # -> ["je", "suis", "Zorblax"]   when row 2 of attention peaks at column 2
    ```
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor


def replace_unk(output_tokens: Sequence[str], attention: Tensor | None,
                source_tokens: Sequence[str], unk: str = "<unk>") -> list[str]:
    """Each ``unk`` in ``output_tokens`` replaced by the source word of highest attention.

    ``attention [T_out, S]`` over the ``source_tokens`` (None leaves the tokens as they are);
    positions past the words (an EOS) are never copied. Returns a new list.
    """
    out = list(output_tokens)
    if attention is None or unk not in out:
        return out
    if attention.dim() != 2 or attention.shape[0] < len(out):
        raise ValueError(f"attention must have shape [{len(out)}, S], "
                         f"got {tuple(attention.shape)}")
    n_src = min(attention.shape[1], len(source_tokens))
    if n_src == 0:
        return out
    best = attention[:, :n_src].argmax(dim=-1).tolist()
    for i, word in enumerate(out):
        if word == unk:
            out[i] = source_tokens[best[i]]
    return out
