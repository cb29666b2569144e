"""Optional API keys: ``Authorization: Bearer KEY`` on the ``/v1`` routes and ``/metrics``.

Off unless ``--api-keys FILE`` is given (`attnkit.server.options.read_api_keys`); a server on
a non-loopback host refuses to start without keys unless ``--insecure``. The health checks
(``/healthz``, ``/readyz``: a load balancer's probes), the live page and the API docs (which
hold no model output; the page asks for the key and sends it) need no key. Keys are compared
in constant time.

Example:
    ```python
    router = APIRouter(dependencies=[Depends(require_key)])
    ```
"""

from __future__ import annotations

import hmac

from fastapi import Request

from attnkit.server.errors import ApiError


def key_of(header: str | None) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header (None for any other form)."""
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    return key.strip() or None if scheme.lower() == "bearer" else None


def require_key(request: Request) -> None:
    """A FastAPI dependency: passes when no key is asked or the request carries a valid one.

    Raises:
        ApiError: 401 with ``WWW-Authenticate: Bearer``.
    """
    keys = request.app.state.server.options.api_keys
    if not keys:
        return
    given = key_of(request.headers.get("authorization"))
    # Every key is compared (no early exit), each in constant time.
    valid = given is not None and sum(hmac.compare_digest(given.encode(), k.encode())
                                      for k in keys) > 0
    if not valid:
        raise ApiError(401, "unauthorized", "this server asks for an API key: send "
                       "'Authorization: Bearer KEY'" if given is None else "unknown API key",
                       headers={"WWW-Authenticate": "Bearer"})
