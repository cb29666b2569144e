"""The routes about the server itself: ``/healthz``, ``/readyz``, ``/v1/models``, ``/metrics``.

``/healthz`` answers while the process runs (a liveness probe); ``/readyz`` only once every
model is loaded and its queues are started, and no longer once a stop was asked (a load
balancer then sends new requests elsewhere while this process drains).

Example:
    ```bash
    curl -s localhost:8000/readyz            # {"status": "ready"}
    curl -s localhost:8000/v1/models | jq '.models[].name'
    ```
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from attnkit.server.auth import require_key
from attnkit.server.errors import error_response
from attnkit.server.schemas import ERRORS, ModelsResponse, Status
from attnkit.server.state import state_of

router = APIRouter(tags=["server"])


@router.get("/healthz", response_model=Status)
async def healthz() -> dict[str, str]:
    """Alive: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Status, responses={503: ERRORS[503]})
async def readyz(request: Request) -> JSONResponse:
    """Ready: every model loaded, queues started, not draining (503 otherwise)."""
    state = state_of(request)
    if state.draining:
        return error_response(503, "draining", "the server is stopping")
    if not state.ready:
        return error_response(503, "not_ready", "the server is starting")
    return JSONResponse({"status": "ready"})


@router.get("/v1/models", response_model=ModelsResponse, dependencies=[Depends(require_key)],
            responses={401: ERRORS[401]})
async def models(request: Request) -> dict:
    """Every loaded run: its app, name, model summary and test metrics; and the limits a
    request must keep."""
    state = state_of(request)
    return {"models": [run.info() for run in state.runs.values()],
            "limits": state.options.limits()}


@router.get("/metrics", dependencies=[Depends(require_key)], response_class=Response,
            responses={200: {"content": {"text/plain": {}}}, 401: ERRORS[401]})
async def metrics(request: Request) -> Response:
    """The Prometheus text format: requests by route and status, latency, batch sizes, queue
    depth."""
    body, content_type = state_of(request).metrics.render()
    return Response(body, media_type=content_type)


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    """No icon (and no 404 in a browser's console)."""
    return Response(status_code=204)
