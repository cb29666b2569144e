"""Word alignment with a translation run: given sentence pairs, which source word each target
word comes from (``attnkit translate align``), its trained aligner (``align-train``), and the
adaptation to the pairs being aligned.

Example:
    ```python
    from attnkit.apps.translate.alignment import align_pairs, check_pairs
    sources, targets = check_pairs(["the house"], ["la maison"])
    align_pairs(load_run("runs/fr"), sources, targets).links     # [{(0, 0), (1, 1)}]
    ```
"""

from attnkit.apps.translate.alignment.aligner import AlignResult, align_pairs, check_pairs
from attnkit.apps.translate.alignment.methods import Method

__all__ = ["AlignResult", "Method", "align_pairs", "check_pairs"]
