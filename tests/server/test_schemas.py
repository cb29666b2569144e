"""Every route's answers, successes and errors, against the OpenAPI schema the server
publishes (``GET /openapi.json``): each status a route answers is declared, with its media
type, and each body (each event's data for a stream) validates against the declared schema.
A route added later fails here until it has a schema and a case below."""

from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("fastapi", reason="the serve extra is missing")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is missing")
from PIL import Image  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
KEY = "k" * 24
AUTH = {"Authorization": f"Bearer {KEY}"}


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def raw_json(text: str) -> dict:
    return {"content": text.encode(), "headers": {**AUTH, "content-type": "application/json"}}


def upload(data: bytes, **form) -> dict:
    return {"files": {"file": ("f.png", data, "image/png")}, "data": form, "headers": AUTH}


def body(**fields) -> dict:
    return {"json": fields, "headers": AUTH}


# (method, route, request, the status it must answer): every route, its answer and its errors.
CASES = [
    ("get", "/healthz", {}, 200),
    ("get", "/readyz", {}, 200),
    ("get", "/v1/models", {"headers": AUTH}, 200),
    ("get", "/v1/models", {}, 401),
    ("get", "/metrics", {"headers": AUTH}, 200),
    ("get", "/metrics", {"headers": {"Authorization": "Bearer " + "z" * 24}}, 401),
    ("post", "/v1/translate", body(texts=["I am cold."], attention=True, page=True), 200),
    ("post", "/v1/translate", body(texts=["I am cold."], beam=3), 200),
    ("post", "/v1/translate", raw_json("{nope"), 400),
    ("post", "/v1/translate", {"json": {"texts": ["x"]}}, 401),
    ("post", "/v1/translate", body(texts=["x"], run="nope"), 404),
    ("post", "/v1/translate", body(texts=["x" * 3000]), 413),
    ("post", "/v1/translate", body(texts=["   "]), 422),
    ("post", "/v1/translate", raw_json('{"texts": ["\\ud800"]}'), 422),
    ("post", "/v1/translate/stream", body(text="The cat does not see her.", page=True), 200),
    ("post", "/v1/translate/stream", body(text="x", run="nope"), 404),
    ("post", "/v1/translate/stream", body(text="x", beam=2), 422),
    ("post", "/v1/sentiment", body(texts=["a superb film", "..."], page=True), 200),
    ("post", "/v1/sentiment", body(texts=["x"] * 65), 413),
    ("post", "/v1/caption", upload(png(), page="true"), 200),
    ("post", "/v1/caption", upload(b"GIF89a but not really"), 415),
    ("post", "/v1/caption", upload(png(), run="translate"), 422),
    ("post", "/v1/predict", body(run="sentiment", texts=["a superb film"], page=True), 200),
    ("post", "/v1/predict", body(run="caption", texts=["x"]), 422),
]


def validate(spec: dict, schema: dict, instance: object, where: str) -> None:
    resolvable = {**schema, "components": spec["components"]}   # "#/components/..." refs
    errors = list(jsonschema.Draft202012Validator(resolvable).iter_errors(instance))
    assert not errors, f"{where}: {errors[0].message} at {list(errors[0].absolute_path)}"


def events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event", "message"), json.loads(lines["data"])))
    return out


def test_every_route_answers_what_its_schema_says(server):
    client = server(api_keys=frozenset({KEY}))
    spec = client.get("/openapi.json").json()
    seen = set()
    for method, path, request, status in CASES:
        r = client.request(method, path, **request)
        where = f"{method.upper()} {path} -> {r.status_code}"
        assert r.status_code == status, f"{where}: {r.text[:300]}"
        seen.add((path, method))
        declared = spec["paths"][path][method]["responses"].get(str(r.status_code))
        assert declared, f"{where}: a status its schema does not declare"
        media = r.headers["content-type"].split(";")[0]
        assert media in declared.get("content", {}), f"{where}: {media} is not declared"
        schema = declared["content"][media].get("schema")
        if media == "application/json":
            validate(spec, schema, r.json(), where)
        elif media == "text/event-stream":
            streamed = events(r.text)
            assert [n for n, _ in streamed][::len(streamed) - 1] == ["start", "final"]
            for name, data in streamed:
                validate(spec, schema, data, f"{where} ({name} event)")
    # Every route of the schema was asked, and every JSON answer it declares has a schema.
    assert seen == {(p, m) for p, ops in spec["paths"].items() for m in ops}
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for status, response in op["responses"].items():
                json_body = response.get("content", {}).get("application/json")
                assert json_body is None or json_body.get("schema"), (method, path, status)


def test_errors_outside_any_route_have_the_error_schema(server):
    client = server()
    spec = client.get("/openapi.json").json()
    error = {"$ref": "#/components/schemas/ErrorResponse"}
    for r in (client.get("/nowhere"), client.get("/v1/translate")):   # 404, 405
        assert r.status_code in (404, 405)
        validate(spec, error, r.json(), r.request.url.path)


def test_an_answer_that_breaks_its_schema_is_never_sent(server):
    """FastAPI checks each answer against the route's model: a prediction that lost a field
    is a 500 in the one error shape, not a 200 that breaks the documented schema."""
    client = server(raise_server_exceptions=False)
    batcher = client.app.state.server.batchers["sentiment"]
    real = batcher.model

    def broken(inputs, **options):
        preds = real(inputs, **options)
        for p in preds:
            p.to_dict = lambda: {"text": "no label, no tokens"}
        return preds
    batcher.model = broken
    r = client.post("/v1/sentiment", json={"texts": ["a superb film"]})
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal"
