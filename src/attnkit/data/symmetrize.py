"""Combining two alignment directions into one: intersection, union, grow-diag-final-and.

An aligner run in each direction gives two link sets over the same pair: ``forward`` (each
target word linked to the source words it came from) and ``reverse`` (each source word to its
target words). Their intersection is precise, their union has high recall, and
grow-diag-final-and (Koehn et al. 2003, as in Moses) starts from the intersection and adds
union links next to it (horizontally, vertically or diagonally) that link a still unaligned
word, then union links whose two words are both still unaligned.

Links are ``(source index, target index)`` on both sides.

Example:
    ```python
    symmetrize({(0, 0), (1, 1)}, {(0, 0), (1, 2)}, "intersection")   # {(0, 0)}
    symmetrize(fwd, rev, "grow-diag-final-and")
    ```
"""

from __future__ import annotations

from collections.abc import Iterable

from attnkit.data.alignments import Link, Links

METHODS = ("none", "intersection", "union", "grow-diag-final-and")
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Iterable[Link], reverse: Iterable[Link]) -> Links:
    """Koehn's grow-diag-final-and of two link sets (the Moses procedure).

    Args:
        forward, reverse: ``(source, target)`` links of the two directions.

    Returns:
        The symmetrised links.

    Example:
        ```python
        grow_diag_final_and({(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)})
        # {(0, 0), (1, 1), (2, 1), (2, 2)}: the intersection, then (2, 1) and (2, 2) next
        # to (1, 1), each linking a word not yet aligned
        ```
    """
    forward, reverse = set(forward), set(reverse)
    union = forward | reverse
    links = forward & reverse
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}
    if not union:
        return links
    n_src = max(i for i, _ in union) + 1
    n_tgt = max(j for _, j in union) + 1

    def add(i: int, j: int) -> None:
        links.add((i, j))
        src_done.add(i)
        tgt_done.add(j)

    grown = True
    while grown:   # grow-diag: neighbours of current links, one side unaligned
        grown = False
        for i in range(n_src):
            for j in range(n_tgt):
                if (i, j) not in links:
                    continue
                for di, dj in _NEIGHBOURS:
                    ni, nj = i + di, j + dj
                    if (ni, nj) in union and (ni, nj) not in links and (
                            ni not in src_done or nj not in tgt_done):
                        add(ni, nj)
                        grown = True
    for direction in (forward, reverse):   # final-and: both words still unaligned
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                add(i, j)
    return links


def symmetrize(forward: Iterable[Link], reverse: Iterable[Link] | None, method: str) -> Links:
    """One link set from two directions (``method`` in `METHODS`; ``"none"`` keeps
    ``forward``).

    Raises:
        ValueError: an unknown method, or a method that needs ``reverse`` without it.
    """
    if method not in METHODS:
        raise ValueError(f"symmetrisation must be one of {', '.join(METHODS)}, got {method!r}")
    forward = set(forward)
    if method == "none":
        return forward
    if reverse is None:
        raise ValueError(f"{method} needs the reverse direction's links")
    reverse = set(reverse)
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return forward | reverse
    return grow_diag_final_and(forward, reverse)
