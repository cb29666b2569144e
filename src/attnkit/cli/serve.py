"""``attnkit serve``: argument parsing only; the server is `attnkit.server` (imported when
the command runs, so ``attnkit --help`` needs no web stack)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from attnkit.server.options import (
    COMPILE,
    ENGINES,
    IMAGE_CHARS,
    ServeOptions,
    parse_run,
    read_api_keys,
)
from attnkit.settings import flag_of

EXAMPLES = """examples:
  attnkit serve --run runs/fr                              # http://127.0.0.1:8000/
  attnkit serve --run fr=runs/fr --run imdb=runs/imdb --run runs/ducks --port 8080
  attnkit serve --run runs/fr-ct2 --engine ctranslate2 --workers 2 --threads 1
  attnkit serve --run runs/fr --host 0.0.0.0 --api-keys keys.txt
  curl -s localhost:8000/v1/translate -H 'content-type: application/json' \\
       -d '{"texts": ["I am cold."], "attention": true}'
"""


BATCHING, LIMITS = "batching", "limits (each answered 413)"
CONNECTIONS = "connections (per process)"
# The numbered options of a group: (group, field, metavar, help); the help gets the default.
NUMBERS = (
    (None, "workers", "N", "server processes, each with every model"),
    (BATCHING, "max_batch", "N", "most inputs in one model call; 1: no batching"),
    (BATCHING, "max_batch_chars", "N", f"most work in one model call: characters times beam "
     f"size, an image {IMAGE_CHARS:,}; one input always goes; a request over it is cut, its "
     "parts taking turns with other requests"),
    (BATCHING, "max_wait_ms", "MS", "hold a request up to MS for others to batch with, even when "
     "the model is free; 0: requests gather only while it is busy"),
    (BATCHING, "max_queue", "N", "most requests a model holds; more get 429"),
    (BATCHING, "timeout_s", "S", "a request not answered in S seconds gets 503, and what of it "
     "has not run is dropped"),
    (BATCHING, "drain_seconds", "S", "on SIGTERM/SIGINT, how long requests in flight may take "
     "to finish"),
    (LIMITS, "max_body_bytes", "N", "JSON body"),
    (LIMITS, "max_texts", "N", "texts per request"),
    (LIMITS, "max_chars", "N", "characters per text"),
    (LIMITS, "max_image_bytes", "N", "uploaded image file"),
    (LIMITS, "max_pixels", "N", "pixels of an image (read from its header, before decoding)"),
    (CONNECTIONS, "max_connections", "N", "open connections; more are answered 503 and closed"),
    (CONNECTIONS, "header_timeout_s", "S", "a connection without a complete request's headers "
     "S seconds after it opened or was answered is closed"),
    (CONNECTIONS, "body_timeout_s", "S", "a request whose body is not all in S seconds after "
     "its headers is answered 408 and its connection closed"),
)
FIELDS = {f.name: f for f in dataclasses.fields(ServeOptions)}


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``attnkit serve`` parser."""
    p = subparsers.add_parser(
        "serve", help="serve runs over HTTP: a JSON API with attention, streams, a live page",
        description="Serve trained runs over HTTP: a JSON API whose answers carry their "
        "attention,\ntoken streams (Server-Sent Events), a live page at /, API docs at /docs, "
        "Prometheus\nmetrics at /metrics. SIGTERM or Ctrl-C drains, then exits 0.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    d = ServeOptions()   # the defaults
    p.add_argument("--run", action="append", required=True, metavar="[NAME=]RUN",
                   help="a run folder to serve, named NAME in requests (default: the folder's "
                   "name); repeat for more")
    p.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host}; "
                   "another than loopback needs --api-keys or --insecure)")
    p.add_argument("--port", type=int, default=d.port, help=f"default {d.port}; 0: any free")
    p.add_argument("--engine", choices=ENGINES, help="translation engine (default attnkit; "
                   "ctranslate2 for an exported folder)")
    p.add_argument("--compile", choices=COMPILE, default=d.compile,
                   help="decode a Transformer run compiled (translate compile): auto "
                   "(default) answers at once and switches once it is ready, on waits for it, "
                   "off never")
    p.add_argument("--device", help="cpu (default) | cuda | cuda:N")
    groups = {None: p, **{title: p.add_argument_group(title)
                          for title in (BATCHING, LIMITS, CONNECTIONS)}}
    for title, name, metavar, what in NUMBERS:
        f = FIELDS[name]
        default = f"{f.default:,}" if isinstance(f.default, int) else f"{f.default:g}"
        groups[title].add_argument(flag_of(f), type=type(f.default), default=f.default,
                                   dest=name, metavar=metavar, help=f"{what} (default {default})")
    p.add_argument("--threads", type=int, metavar="N", help="torch threads per process "
                   "(default: the cores divided by --workers)")
    p.add_argument("--no-access-log", dest="access_log", action="store_false",
                   help="log no line per request (by default: method, path, status, ms)")
    k = p.add_argument_group("keys")
    k.add_argument("--api-keys", metavar="FILE", help="accept requests with 'Authorization: "
                   "Bearer KEY' for a KEY of FILE (one a line) only")
    k.add_argument("--insecure", action="store_true", help="serve a non-loopback --host "
                   "without keys")
    k.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   dest="allowed_hosts", help="without --api-keys, a Host header to answer "
                   "besides the --host address, localhost and addresses of its kind (others get "
                   "421: a DNS-rebinding page); repeat for more (default: none)")
    p.set_defaults(func=run_serve)
    return p


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """The `ServeOptions` of parsed arguments (`serve` and `create_app` check them)."""
    values = {name: getattr(args, name) for name in FIELDS if name not in ("runs", "api_keys")}
    return ServeOptions(**{**values, "allowed_hosts": tuple(args.allowed_hosts)},
                        runs=[parse_run(r) for r in args.run],
                        api_keys=read_api_keys(args.api_keys) if args.api_keys else frozenset())


def run_serve(args: argparse.Namespace) -> int:
    from attnkit.server.main import serve

    return serve(serve_options(args))
