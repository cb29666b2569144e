"""`APPS`: every application by name, the built-in three and those other packages add.

A package adds an app the way Python plugins do, with an entry point in the group
``attnkit.apps`` that names an `attnkit.apps.App` instance (or class):

```toml
[project.entry-points."attnkit.apps"]
reverse = "attnkit_reverse:APP"
```

Apps are imported when first used (``attnkit --help`` imports none of their models); a name
that fails to import is one clear error when it is asked for, and never hides the others.

Example:
    ```python
    from attnkit.apps import APPS

    sorted(APPS)                       # ['caption', 'sentiment', 'translate', ...]
    APPS["translate"].train({"data": "synthetic"}, "runs/demo")
    ```
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from attnkit.errors import UsageError

if TYPE_CHECKING:
    from attnkit.apps.base import App

ENTRY_POINT_GROUP = "attnkit.apps"
BUILTIN = {"translate": "attnkit.apps.translate:APP",
           "sentiment": "attnkit.apps.sentiment:APP",
           "caption": "attnkit.apps.caption:APP"}


class AppRegistry(Mapping[str, "App"]):
    """Name -> `App`, loaded on first use. ``register`` adds one at run time (tests, notebooks).
    """

    def __init__(self) -> None:
        self._loaded: dict[str, App] = {}
        self._extra: dict[str, App] = {}

    def _targets(self) -> dict[str, str]:
        targets = dict(BUILTIN)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            targets.setdefault(ep.name, ep.value)
        return targets

    def names(self) -> list[str]:
        """Every app name, without importing any app."""
        return sorted(set(self._targets()) | set(self._extra))

    def register(self, app: App) -> App:
        """Add ``app`` under ``app.name`` (replacing an app of that name)."""
        self._extra[app.name] = app
        self._loaded.pop(app.name, None)
        return app

    def __getitem__(self, name: str) -> App:
        if name in self._extra:
            return self._extra[name]
        if name not in self._loaded:
            target = self._targets().get(name)
            if target is None:
                raise KeyError(name)
            self._loaded[name] = _load(name, target)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def _load(name: str, target: str) -> App:
    from attnkit.apps.base import App

    module_name, _, attribute = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attribute or "APP")
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"the app {name!r} ({target}) cannot be loaded: {exc}") from None
    app = obj() if isinstance(obj, type) else obj
    if not isinstance(app, App) or app.name != name:
        raise UsageError(f"the app {name!r} ({target}) is not an attnkit App named {name!r}")
    return app


APPS = AppRegistry()
