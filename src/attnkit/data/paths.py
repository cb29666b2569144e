"""Whether a name taken from a data file stays inside its folder once resolved.

Names in archives, caption files and review folders come from the data, not the user: an
absolute name, a ``..`` part or a symbolic link could make a reader open (or write) a file
outside the folder it was given. Both separators count, since the data may come from Windows.

Example:
    ```python
    outside_reason(Path("images").resolve(), "../etc/passwd")   # "contains '..'"
    outside_reason(Path("images").resolve(), "dog.jpg")          # None
    ```
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

_DRIVE = re.compile(r"^[A-Za-z]:")


def outside_reason(root: Path, name: str) -> str | None:
    """Why ``root / name`` may not be opened, or None when it resolves inside ``root``.

    Args:
        root: the folder, already resolved (``Path.resolve()``).
        name: a relative name read from the data (``/`` or ``\\`` separated).

    Returns:
        ``"is an absolute path"``, ``"contains '..'"``, ``"resolves outside <root>"`` (through a
        symbolic link), or None.
    """
    posix = name.replace("\\", "/")
    if posix.startswith("/") or _DRIVE.match(posix):
        return "is an absolute path"
    if ".." in PurePosixPath(posix).parts:
        return "contains '..'"
    resolved = (root / posix).resolve()
    if resolved != root and root not in resolved.parents:
        return f"resolves outside {root}"
    return None
