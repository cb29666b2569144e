"""`APPS`: every application by name, the built-in three and those plugins add through the
entry-point group ``attnkit.apps`` (docs/guide/add-an-app.md), each imported when first used;
a plugin that fails to import, or whose name is taken, never hides the others."""

from __future__ import annotations

import importlib
import re
import threading
import warnings
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from attnkit.errors import UsageError, first_line

if TYPE_CHECKING:
    from attnkit.apps.base import App

ENTRY_POINT_GROUP = "attnkit.apps"
BUILTIN = {"translate": "attnkit.apps.translate:APP",
           "sentiment": "attnkit.apps.sentiment:APP",
           "caption": "attnkit.apps.caption:APP"}
# The commands of the ``attnkit`` command line besides the apps: an app by one of these names
# could never be asked for, and two subcommands of one name break every command.
RESERVED = ("serve",)
# How long a plugin's module may take to import (a hung import is an error, not a hang).
PLUGIN_IMPORT_SECONDS = 30.0
# What an app's name must look like to be a command (``attnkit NAME ...``).
NAME = re.compile(r"[a-z][a-z0-9_-]*")


class PluginWarning(UserWarning):
    """A plugin app left out: its name is taken, or two plugins have one name."""


class AppRegistry(Mapping[str, "App"]):
    """Name -> `App`, loaded on first use. ``register`` adds one at run time (tests, notebooks).
    """

    def __init__(self) -> None:
        self._loaded: dict[str, App] = {}
        self._extra: dict[str, App] = {}
        self._warned: set[str] = set()

    def _plugins(self) -> dict[str, EntryPoint]:
        """The entry points of the apps other packages add, by name (read afresh each time: a
        package may be installed while the process runs), those left out warned about once."""
        found: dict[str, EntryPoint] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            who = distribution(ep)
            if ep.name in BUILTIN or ep.name in RESERVED:
                self._warn(f"the app {ep.name!r} of {who} is skipped: {ep.name!r} is a "
                           "command of attnkit itself")
            elif not NAME.fullmatch(ep.name):
                self._warn(f"the app {ep.name!r} of {who} is skipped: an app's name must be "
                           "lower-case letters, digits, '-' or '_', starting with a letter")
            elif ep.name in found:
                first = found[ep.name]
                if (first.value, distribution(first)) != (ep.value, who):
                    self._warn(f"two packages add an app named {ep.name!r}: "
                               f"{distribution(first)} and {who}; the first one's is used")
            else:
                found[ep.name] = ep
        return found

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, PluginWarning, stacklevel=4)

    def _targets(self) -> dict[str, tuple[str, str]]:
        """Name -> (``module:attribute``, where it comes from)."""
        return {**{name: (target, "attnkit") for name, target in BUILTIN.items()},
                **{name: (ep.value, distribution(ep)) for name, ep in self._plugins().items()}}

    def names(self) -> list[str]:
        """Every app name, without importing any app."""
        return sorted(set(self._targets()) | set(self._extra))

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is one of attnkit's own apps (not a plugin's)."""
        return name in BUILTIN and name not in self._extra

    def origin(self, name: str) -> str:
        """Where the app ``name`` comes from, for messages (``"the package 'attnkit-reverse
        0.1.0'"``, ``"attnkit"``)."""
        if name in self._extra:
            return "an app registered at run time"
        return self._targets().get(name, ("", "nowhere"))[1]

    def register(self, app: App) -> App:
        """Add ``app`` under ``app.name`` (replacing an app of that name)."""
        self._extra[app.name] = app
        self._loaded.pop(app.name, None)
        return app

    def __getitem__(self, name: str) -> App:
        """The app ``name``, imported on first use. KeyError: no such app; UsageError: its module
        cannot be imported or is not an attnkit `App` of that name (naming its distribution).
        """
        if name in self._extra:
            return self._extra[name]
        if name not in self._loaded:
            self._loaded[name] = _load(name, *self._targets()[name], timeout=None
                                       if name in BUILTIN else PLUGIN_IMPORT_SECONDS)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def distribution(ep: EntryPoint) -> str:
    """The package that declares ``ep``, for messages (``"the package 'attnkit-reverse
    0.1.0'"``)."""
    dist = ep.dist
    return (f"the entry point {ep.value!r}" if dist is None
            else f"the package '{dist.name} {dist.version}'")


def _load(name: str, target: str, origin: str, *, timeout: float | None = None) -> App:
    from attnkit.apps.base import App

    module_name, _, attribute = target.partition(":")
    where = f"the app {name!r} ({target}, from {origin})"
    try:
        obj = getattr(_import(module_name, timeout), attribute or "APP")
        app = obj() if isinstance(obj, type) else obj
    except (Exception, SystemExit) as exc:
        # A plugin's module may raise anything at import (a RuntimeError, a SyntaxError, a
        # sys.exit): it becomes this app's error, never the whole command line's. Ctrl-C
        # (KeyboardInterrupt) is not caught.
        raise UsageError(f"{where} cannot be loaded: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None
    if not isinstance(app, App) or app.name != name:
        raise UsageError(f"{where} is not an attnkit App named {name!r}")
    return app


def _import(module: str, timeout: float | None):
    """``importlib.import_module(module)`` given up after ``timeout`` seconds (None: no limit), in
    a daemon thread so that an endless import does not keep the process alive.
    """
    if timeout is None:
        return importlib.import_module(module)
    done: dict[str, object] = {}

    def run() -> None:
        try:
            done["module"] = importlib.import_module(module)
        except BaseException as exc:   # handed to the caller, which names the plugin
            done["error"] = exc

    thread = threading.Thread(target=run, name=f"import {module}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"its import did not end within {timeout:g} s")
    if "error" in done:
        raise done["error"]   # type: ignore[misc]
    return done["module"]


APPS = AppRegistry()
