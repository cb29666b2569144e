"""Every route of the server through the ASGI test client, on tiny runs of the three apps:
what each answers, and each error as ``{"error": {"code", "message"}}`` with its status."""

from __future__ import annotations

import io
import json
import struct
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("fastapi", reason="the serve extra is missing")
pytest.importorskip("prometheus_client", reason="the serve extra is missing")
pytest.importorskip("python_multipart", reason="the serve extra is missing")

from attnkit.apps import APPS  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
KEY = "k" * 24


def wait_until(condition, timeout: float = 30) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return False


def error(response, status: int, code: str) -> str:
    """The message of an error response, after checking its status, shape and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert "Traceback" not in response.text
    return body["error"]["message"]


def png(size=(32, 32), color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def png_bomb(width: int, height: int) -> bytes:
    """A valid PNG header declaring ``width x height`` pixels, with next to no data: what a
    decompression bomb looks like before decoding."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


# ------------------------------------------------------------------ the service routes
def test_health_ready_models_and_limits(server):
    client = server()
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    body = client.get("/v1/models").json()
    models = {m["name"]: m for m in body["models"]}
    assert set(models) == {"translate", "sentiment", "caption"}
    t = models["translate"]
    assert t["app"] == "translate" and t["engine"] == "attnkit" and t["streams"]
    assert t["summary"]["run"] == "translate" and t["summary"]["parameters"] > 0
    assert "bleu" in t["test_metrics"] and "run" not in t["test_metrics"]  # no server paths
    assert models["caption"]["inputs"] == "image" and not models["caption"]["streams"]
    assert body["limits"]["max_texts"] == 64


def test_readyz_answers_503_while_draining(server):
    client = server()
    client.app.state.server.draining = True
    error(client.get("/readyz"), 503, "draining")
    assert client.get("/healthz").status_code == 200


def test_fastapis_own_docs_are_served_offline(server):
    client = server()
    spec = client.get("/openapi.json").json()
    assert spec["components"]["schemas"]["TranslateRequest"]["additionalProperties"] is False
    docs = client.get("/docs")
    assert docs.status_code == 200 and "SwaggerUIBundle" in docs.text
    assert "https://" not in docs.text and "http://" not in docs.text   # no CDN, no font
    for asset in ("/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css"):
        assert client.get(asset).status_code == 200, asset
    assert "https://" not in client.get("/").text and "http://" not in client.get("/").text
    assert client.get("/redoc").status_code == 404
    assert client.get("/favicon.ico").status_code == 204


def test_live_page_lists_the_runs_with_its_policy(server):
    client = server()
    page = client.get("/")
    assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
    html = page.text
    assert "connect-src 'self'" in html and "default-src 'none'" in html
    from attnkit.viz.translation_page import SCRIPT_SOURCE

    assert SCRIPT_SOURCE in html       # the explorer page it frames may run its script
    data = json.loads(html.split('id="attnkit-data">')[1].split("</script>")[0])
    assert [r["name"] for r in data["runs"]] == ["translate", "sentiment", "caption"]


def test_metrics_count_routes_statuses_batches_and_queues(server):
    client = server()
    client.post("/v1/translate", json={"texts": ["I am cold."]})
    client.post("/v1/translate", json={"texts": []})
    client.get("/nowhere")
    text = client.get("/metrics").text
    assert 'attnkit_requests_total{method="POST",route="/v1/translate",status="200"} 1.0' in text
    assert 'attnkit_requests_total{method="POST",route="/v1/translate",status="422"} 1.0' in text
    assert 'route="other",status="404"' in text          # unknown paths: one label
    assert 'attnkit_request_seconds_bucket{le="0.001",route="/v1/translate"}' in text
    assert 'attnkit_batch_size_count{run="translate"} 1.0' in text
    assert 'attnkit_queue_depth{run="translate"} 0.0' in text


# ------------------------------------------------------------------ the prediction routes
def test_translate_with_attention_is_predict(server, tiny_runs, loaded_runs):
    client = server()
    texts = tiny_runs["translate"][1]
    r = client.post("/v1/translate", json={"texts": texts, "attention": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["run"] == "translate" and body["page"] is None
    expected = APPS["translate"].predict(loaded_runs["translate"].loaded, texts)
    for got, want in zip(body["translations"], expected, strict=True):
        assert got["text"] == want.text and got["tokens"] == want.tokens
        w = np.array(got["weights"])
        assert w.shape == (len(got["tokens"]), len(got["source_tokens"]))
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-3)
        assert "layer_weights" not in got
    plain = client.post("/v1/translate", json={"texts": texts, "beam": 3}).json()
    assert all(t["weights"] is None for t in plain["translations"])


def test_a_paragraph_is_translated_sentence_by_sentence(server, tiny_runs, loaded_runs):
    """Three sentences in one text come back as three translated sentences (each as it is
    translated alone) with their own attention; "split": false reads the text whole."""
    client = server()
    alone = ["The cat does not see her.", "I am cold.", "The cat does not see her."]
    paragraph = " ".join(alone)
    expected = APPS["translate"].predict(loaded_runs["translate"].loaded, alone)
    r = client.post("/v1/translate", json={"texts": [paragraph], "attention": True})
    assert r.status_code == 200, r.text
    got = r.json()["translations"][0]
    assert got["source"] == paragraph and got["weights"] is None
    assert [t["source"] for t in got["sentences"]] == alone
    assert [t["text"] for t in got["sentences"]] == [p.text for p in expected]
    assert got["text"] == " ".join(p.text for p in expected)
    for t in got["sentences"]:
        assert np.array(t["weights"]).shape == (len(t["tokens"]), len(t["source_tokens"]))
    whole = client.post("/v1/translate", json={"texts": [paragraph], "split": False}).json()
    assert whole["translations"][0]["sentences"] is None


def test_translate_page(server):
    r = server().post("/v1/translate", json={"texts": ["I am cold."], "page": True})
    page = r.json()["page"]
    assert page.startswith("<!DOCTYPE html>") and "attnkit-data" in page
    assert r.json()["translations"][0]["weights"] is None   # the page's, not asked for


def test_pages_are_built_off_the_model_thread(server, monkeypatch):
    """The model thread goes on with the next batch while a page is built."""
    client = server()
    state = client.app.state.server
    app, batcher = state.runs["translate"].app, state.batchers["translate"]
    real_page, real_predict, threads = type(app).page, batcher.model, {}

    def page(self, predictions, summary):
        threads["page"] = threading.current_thread()
        return real_page(self, predictions, summary)

    def predict(inputs, **options):
        threads["model"] = threading.current_thread()
        return real_predict(inputs, **options)
    monkeypatch.setattr(type(app), "page", page)
    batcher.model = predict
    assert client.post("/v1/translate", json={"texts": ["I am cold."], "page": True}).json()[
        "page"].startswith("<!DOCTYPE html>")
    assert threads["page"] is not threads["model"], threads


def test_sentiment(server):
    client = server()
    r = client.post("/v1/sentiment", json={"texts": ["a superb film", "...", "awful"],
                                           "page": True})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results[1]["label"] == "empty" and results[1]["prob"] is None
    first = results[0]
    assert first["label"] in ("positive", "negative") and 0 <= first["prob"] <= 1
    assert len(first["weights"]) == len(first["tokens"]) == len(first["contributions"])
    assert r.json()["page"].startswith("<!DOCTYPE html>")
    plain = client.post("/v1/sentiment", json={"texts": ["a superb film"], "attention": False})
    assert plain.json()["results"][0]["weights"] is None
    # The method measured most faithful for the app is named and sent (when it can be).
    if first["shown"] != "attention":
        assert len(first["explanations"][first["shown"]]) == len(first["tokens"])
    assert first["why"].startswith("Shown first:")
    assert plain.json()["results"][0]["explanations"] is None


def test_one_access_log_line_per_request(server, caplog):
    import logging
    import re

    caplog.set_level(logging.INFO, logger="attnkit.access")
    client = server()
    client.get("/healthz")
    client.post("/v1/translate", json={"texts": []})
    lines = [r.getMessage() for r in caplog.records if r.name == "attnkit.access"]
    assert len(lines) == 2
    assert re.fullmatch(r"GET /healthz 200 \d+\.\d ms", lines[0]), lines
    assert re.fullmatch(r"POST /v1/translate 422 \d+\.\d ms", lines[1]), lines
    caplog.clear()
    server(access_log=False).get("/healthz")
    assert not [r for r in caplog.records if r.name == "attnkit.access"]


def test_caption_upload(server):
    r = server().post("/v1/caption", files={"file": ("duck.png", png(), "image/png")},
                      data={"beam": "2", "page": "true"})
    assert r.status_code == 200, r.text
    cap = r.json()["captions"][0]
    assert cap["image"] == "duck.png" and cap["words"] and cap["original_size"] == [32, 32]
    maps = np.array(cap["weights"])
    assert maps.shape[0] == len(cap["words"]) and maps.ndim == 3
    assert r.json()["page"].startswith("<!DOCTYPE html>")


def test_generic_predict_route_serves_any_text_app(server):
    client = server()
    r = client.post("/v1/predict", json={"run": "sentiment", "texts": ["a superb film"]})
    assert r.status_code == 200 and r.json()["app"] == "sentiment"
    assert r.json()["predictions"][0]["label"] in ("positive", "negative")
    r = client.post("/v1/predict", json={"run": "translate", "texts": ["I am cold."]})
    translated = r.json()["predictions"][0]
    assert translated["source"] == "I am cold." and translated["tokens"], translated
    assert len(translated["weights"]) == len(translated["tokens"])
    error(client.post("/v1/predict", json={"run": "caption", "texts": ["x"]}), 422,
          "wrong_app")


def test_stream_sends_each_token_with_its_row_then_the_whole_translation(server, loaded_runs):
    client = server()
    events = []
    with client.stream("POST", "/v1/translate/stream",
                       json={"text": "The cat does not see her.", "page": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    names = [n for n, _ in events]
    assert names[0] == "start" and names[-1] == "final" and set(names[1:-1]) <= {"token"}
    start, final = events[0][1], events[-1][1]
    tokens = [d for n, d in events if n == "token"]
    translation = final["translation"]
    want = APPS["translate"].predict(loaded_runs["translate"].loaded,
                                     ["The cat does not see her."])[0]
    assert translation["text"] == want.text
    assert [t["token"] for t in tokens] == translation["tokens"]
    assert [t["index"] for t in tokens] == list(range(len(tokens)))
    for t, row in zip(tokens, translation["weights"], strict=True):
        assert len(t["weights"]) == len(start["source_tokens"])
        np.testing.assert_allclose(t["weights"], row, atol=1e-3)
    assert final["page"].startswith("<!DOCTYPE html>")


def _events(client, body):
    """The (name, data) of each event of a ``/v1/translate/stream`` answer."""
    events, name = [], None
    with client.stream("POST", "/v1/translate/stream", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    return events


def test_a_text_streams_sentence_after_sentence_and_ends_joined(server):
    client = server()
    text = "I am cold. The cat does not see her."
    events = _events(client, {"text": text})
    starts = [d for n, d in events if n == "start"]
    assert [(d["sentence"], d["source"]) for d in starts] == \
        [(0, "I am cold."), (1, "The cat does not see her.")]
    # Every token of the first sentence comes before the second sentence starts.
    order = [(n, d["sentence"]) for n, d in events if n in ("start", "token")]
    assert order == sorted(order, key=lambda e: e[1]) and order[0] == ("start", 0)
    final = events[-1][1]["translation"]
    whole = client.post("/v1/translate", json={"texts": [text], "attention": True}).json()
    assert final["text"] == whole["translations"][0]["text"]
    assert [p["text"] for p in final["sentences"]] == \
        [p["text"] for p in whole["translations"][0]["sentences"]]
    for k, part in enumerate(final["sentences"]):
        assert [d["token"] for n, d in events if n == "token" and d["sentence"] == k] == \
            part["tokens"]
    # "split": false keeps one piece: one start, no parts.
    events = _events(client, {"text": text, "split": False})
    assert [n for n, _ in events].count("start") == 1
    assert events[0][1]["source"] == text and not events[-1][1]["translation"].get("sentences")


def test_stream_errors_come_before_the_stream(server):
    client = server()
    error(client.post("/v1/translate/stream", json={"text": "x", "beam": 5}), 422,
          "invalid_request")
    error(client.post("/v1/translate/stream", json={"text": "   "}), 422, "bad_input")
    error(client.post("/v1/translate/stream", json={"text": "x" * 3000}), 413, "text_too_long")
    error(client.post("/v1/translate/stream", json={"text": "x", "run": "nope"}), 404,
          "unknown_run")


# ------------------------------------------------------------------ every error
@pytest.mark.parametrize("body, status, code, where", [
    ({"texts": []}, 422, "invalid_request", "texts"),
    ({}, 422, "invalid_request", "texts: Field required"),
    ({"texts": ["x"], "atention": True}, 422, "invalid_request", "atention: Extra inputs"),
    ({"texts": ["x"], "beam": "5"}, 422, "invalid_request", "beam"),
    ({"texts": ["x"], "beam": 0}, 422, "invalid_request", "beam"),
    ({"texts": ["x"], "attention": "yes"}, 422, "invalid_request", "attention"),
    ({"texts": "I am cold."}, 422, "invalid_request", "texts"),
    ({"texts": [1]}, 422, "invalid_request", "texts[0]"),
    ({"texts": ["   "]}, 422, "bad_input", "empty sentence"),
    ({"texts": ["x"], "run": "nope"}, 404, "unknown_run", "nope"),
    ({"texts": ["x"], "run": "sentiment"}, 422, "wrong_app", "sentiment run"),
    ({"texts": ["x"] * 65}, 413, "too_many_texts", "65 texts"),
    ({"texts": ["x" * 2001]}, 413, "text_too_long", "2,001 characters"),
])
def test_translate_refuses(server, body, status, code, where):
    assert where in error(server().post("/v1/translate", json=body), status, code)


def test_malformed_json_route_and_method(server):
    client = server()
    for body in (b"{nope", b'{"texts": ["\xff"]}'):   # not JSON; not UTF-8
        error(client.post("/v1/translate", content=body,
                          headers={"content-type": "application/json"}), 400, "invalid_json")
    assert "/nowhere" in error(client.get("/nowhere"), 404, "not_found")
    error(client.get("/v1/translate"), 405, "method_not_allowed")


@pytest.mark.parametrize("path, body", [
    ("/v1/translate", {"texts": ["I am \ud800 cold."]}),
    ("/v1/translate", {"texts": ["x"], "run": "\ud800"}),
    ("/v1/sentiment", {"texts": ["\udfff"]}),
    ("/v1/predict", {"run": "sentiment", "texts": ["\ud800"]}),
    ("/v1/translate/stream", {"text": "I am \ud800 cold."}),
])
def test_a_lone_surrogate_is_a_422_not_a_500(server, path, body):
    """JSON can spell a lone surrogate; no answer holding it could be encoded."""
    client = server(raise_server_exceptions=False)
    raw = json.dumps(body).encode()            # the escape itself, as a client sends it
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert "surrogate" in error(r, 422, "invalid_request")


def test_body_size_is_capped_before_reading(server):
    client = server(max_body_bytes=1000)
    big = json.dumps({"texts": ["x" * 600, "y" * 600]}).encode()
    assert "1,000 bytes" in error(client.post(
        "/v1/translate", content=big, headers={"content-type": "application/json"}), 413,
        "body_too_large")

    def chunks():   # no Content-Length: counted as it arrives
        yield big[:500]
        yield big[500:]
    error(client.post("/v1/translate", content=chunks(),
                      headers={"content-type": "application/json"}), 413, "body_too_large")
    error(client.post("/v1/translate", content=b"{}",
                      headers={"content-type": "application/json", "content-length": "x"}),
          400, "bad_request")


def test_image_limits_and_bad_images(server):
    client = server(max_image_bytes=20_000, max_pixels=64 * 64)

    def upload(data, **form):
        return client.post("/v1/caption", files={"file": ("f.png", data, "image/png")},
                           data=form)
    error(upload(png_bomb(100_000, 100_000)), 413, "too_many_pixels")   # never decoded
    assert "65 x 64" in error(upload(png((65, 64))), 413, "too_many_pixels")
    error(upload(b"GIF89a but not really"), 415, "not_an_image")
    error(upload(b""), 422, "empty_image")
    error(upload(png(), bogus="1"), 422, "invalid_request")
    error(upload(png(), beam="zero"), 422, "invalid_request")
    error(client.post("/v1/caption", data={"beam": "1"}), 422, "invalid_request")
    error(upload(png(), run="translate"), 422, "wrong_app")
    small = server(max_image_bytes=5_000)
    bmp = io.BytesIO()
    Image.new("RGB", (60, 60)).save(bmp, format="BMP")        # 10,854 bytes
    error(small.post("/v1/caption", files={"file": ("f.bmp", bmp.getvalue(), "image/bmp")}),
          413, "image_too_large")
    over = small.post("/v1/caption", files={"file": ("f.png", b"x" * 200_000, "image/png")})
    error(over, 413, "body_too_large")


def test_a_bad_upload_is_named_as_sent_not_by_the_servers_copy(server):
    """An image whose header passes but whose data is cut: 422, and the message names the
    file as the client sent it, never the server's temporary copy (where it keeps files)."""
    import tempfile

    noise = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(noise).save(out, format="PNG")
    cut = out.getvalue()[: len(out.getvalue()) // 2]
    message = error(server().post("/v1/caption", files={"file": ("holiday.png", cut,
                                                                 "image/png")}),
                    422, "bad_input")
    assert "holiday.png" in message, message
    assert "attnkit-upload" not in message and tempfile.gettempdir() not in message, message


def test_a_run_must_be_named_among_several_and_exist(server):
    client = server(names=("translate", "sentiment"))
    error(client.post("/v1/caption", files={"file": ("f.png", png(), "image/png")}), 404,
          "unknown_run")
    two = server(names=("sentiment",))
    error(two.post("/v1/translate", json={"texts": ["x"]}), 404, "unknown_run")


def test_several_runs_of_one_app_need_a_name(server, loaded_runs):
    from fastapi.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.options import RunSpec, ServeOptions
    from attnkit.server.state import ServedRun

    t = loaded_runs["translate"]
    runs = {n: ServedRun(n, t.app, t.loaded, None) for n in ("fr1", "fr2")}
    app = create_app(ServeOptions(runs=[RunSpec(n, t.loaded.path) for n in runs],
                                  allowed_hosts=("testserver",)), runs)
    with TestClient(app) as client:
        assert "fr1, fr2" in error(client.post("/v1/translate", json={"texts": ["x"]}), 422,
                                   "run_required")
        ok = client.post("/v1/translate", json={"texts": ["I am cold."], "run": "fr2"})
        assert ok.json()["run"] == "fr2"


def test_api_keys(server):
    client = server(api_keys=frozenset({KEY}))
    r = client.post("/v1/translate", json={"texts": ["x"]})
    error(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"
    error(client.post("/v1/translate", json={"texts": ["x"]},
                      headers={"Authorization": "Bearer " + "z" * 24}), 401, "unauthorized")
    ok = client.post("/v1/translate", json={"texts": ["I am cold."]},
                     headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200
    error(client.get("/metrics"), 401, "unauthorized")
    error(client.get("/v1/models"), 401, "unauthorized")
    for open_route in ("/healthz", "/readyz", "/", "/docs", "/openapi.json"):
        assert client.get(open_route).status_code == 200, open_route


def test_an_unexpected_failure_is_a_500_without_traceback(server):
    client = server(raise_server_exceptions=False)

    def broken(inputs, **options):
        raise RuntimeError("secret internals")
    client.app.state.server.batchers["translate"].model = broken
    message = error(client.post("/v1/translate", json={"texts": ["x"]}), 500, "internal")
    assert "secret" not in message


class Held:
    """A translate model call that waits until released (a slow model, deterministically)."""

    def __init__(self, client):
        self.batcher = client.app.state.server.batchers["translate"]
        self.real, self.go, self.entered = self.batcher.model, threading.Event(), \
            threading.Event()
        self.batcher.model = self

    def __call__(self, inputs, **options):
        self.entered.set()
        self.go.wait(10)
        return self.real(inputs, **options)


def test_full_queue_is_429_with_retry_after_and_others_still_answer(server):
    client = server(max_queue=1)
    held = Held(client)
    first = []
    thread = threading.Thread(target=lambda: first.append(
        client.post("/v1/translate", json={"texts": ["I am cold."]})))
    thread.start()
    assert held.entered.wait(10)
    r = client.post("/v1/translate", json={"texts": ["I am cold."]})
    error(r, 429, "overloaded")
    assert r.headers["retry-after"] == "1"
    # The event loop is free while the model works: other routes answer.
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/models").status_code == 200
    held.go.set()
    thread.join(10)
    assert first[0].status_code == 200


def test_past_the_deadline_is_503(server):
    client = server(timeout_s=0.3)
    held = Held(client)
    r = client.post("/v1/translate", json={"texts": ["I am cold."]})
    error(r, 503, "deadline")
    held.go.set()
    ok = client.post("/v1/translate", json={"texts": ["I am cold."]})
    assert ok.status_code == 200


def test_concurrent_requests_share_a_batch_and_a_bad_one_fails_alone(server):
    client = server(max_wait_ms=300)
    batcher = client.app.state.server.batchers["translate"]
    calls = []
    real = batcher.model

    def counted(inputs, **options):
        calls.append(list(inputs))
        return real(inputs, **options)
    batcher.model = counted
    texts = ["I am cold.", "   ", "The cat does not see her.", "I am cold ."]
    out = [None] * len(texts)

    def ask(i):
        out[i] = client.post("/v1/translate", json={"texts": [texts[i]]})
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(calls[0]) > 1               # gathered into one call
    error(out[1], 422, "bad_input")
    for i in (0, 2, 3):
        assert out[i].status_code == 200, out[i].text


def test_a_large_request_past_its_deadline_holds_no_other_client(server):
    """Issue #47 (3): 64 texts of 2,000 characters at beam 32 got their 503 at the deadline,
    the model went on with them, and every other client's one-sentence request got 503 too.
    The texts now take turns with other requests, and none of them runs after the deadline."""
    client = server(names=("translate",), timeout_s=2.0)   # its 64 texts take 10 s or more
    batcher = client.app.state.server.batchers["translate"]
    real, calls = batcher.model, []

    def predict(inputs, **options):
        calls.append(len(inputs))
        return real(inputs, **options)
    batcher.model = predict
    large = {"texts": [("The cat does not see her. " * 80)[:2000]] * 64, "beam": 32}
    out = {}
    thread = threading.Thread(target=lambda: out.update(r=client.post("/v1/translate",
                                                                      json=large)))
    thread.start()
    assert wait_until(lambda: calls)                        # the model is on it
    small = client.post("/v1/translate", json={"texts": ["I am cold."]})
    assert small.status_code == 200, small.text
    thread.join(60)
    error(out["r"], 503, "deadline")
    ran = len(calls)
    time.sleep(1)
    assert len(calls) == ran and sum(calls) - 1 < 64        # nothing more of it ran


def test_host_header_is_checked_without_keys(server, tmp_path):
    """Issue #47 (11), DNS rebinding: a page of another site whose name resolves to this
    machine reached an unkeyed loopback server. Only the server's own names are answered."""
    client = server(names=("sentiment",), allowed_hosts=("attnkit.internal",))
    body = {"texts": ["a superb film"]}
    for host in ("rebound.example", "rebound.example:8000", "localhost.example", "10.1.2.3"):
        assert host.split(":")[0] in error(client.post("/v1/sentiment", json=body,
                                                       headers={"host": host}),
                                           421, "unknown_host")
    error(client.get("/", headers={"host": "rebound.example"}), 421, "unknown_host")
    for host in ("localhost", "localhost:8000", "127.0.0.1:8000", "127.0.0.2", "[::1]:80",
                 "attnkit.internal", "ATTNKIT.internal:1234"):
        r = client.post("/v1/sentiment", json=body, headers={"host": host})
        assert r.status_code == 200, (host, r.text)
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n", encoding="utf-8")
    keyed = server(names=("sentiment",), api_keys=frozenset([KEY]), allowed_hosts=())
    r = keyed.post("/v1/sentiment", json=body, headers={"host": "rebound.example",
                                                         "authorization": f"Bearer {KEY}"})
    assert r.status_code == 200, r.text                     # keys guard it: any name


def test_hosts_of_a_wildcard_address_and_of_a_name():
    from attnkit.server.limits import Hosts
    from attnkit.server.options import ServeOptions

    wildcard = Hosts(ServeOptions(host="0.0.0.0", insecure=True))
    assert wildcard.allows(b"10.1.2.3:8000") and wildcard.allows(b"[2001:db8::1]:80")
    assert not wildcard.allows(b"rebound.example")
    named = Hosts(ServeOptions(host="box.lan", insecure=True, allowed_hosts=("Box.example",)))
    assert named.allows(b"box.lan:8000") and named.allows(b"box.example.")
    assert not named.allows(b"10.1.2.3") and not named.allows(b"127.0.0.1x")


def test_head_of_the_live_page_answers_like_get(server):
    """Issue #48: HEAD / was 405."""
    r = server(names=("sentiment",)).head("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert not r.content


def test_metrics_label_unknown_methods_other(server):
    """Issue #47 (6): 10,000 random methods made 10,019 series; 3,000 methods of 8 KB made
    /metrics 50 MB. A method HTTP does not define is counted as "other"."""
    client = server(names=("sentiment",))
    for i in range(50):
        client.request(f"M{i}X" + "Y" * (8000 if i % 10 == 0 else 0), "/healthz")
    client.request("DELETE", "/nowhere")
    text = client.get("/metrics").text
    assert 'method="other",route="/healthz",status="405"} 50.0' in text
    assert 'method="DELETE",route="other",status="404"} 1.0' in text
    assert len([line for line in text.splitlines() if "requests_total{" in line]) == 2
    assert len(text) < 30_000


def test_an_access_line_is_one_escaped_line(server, caplog):
    """Issue #47 (5): a path with %0a wrote a forged access line; ESC, BEL and CR reached
    the log raw; 3,000 %0a added 2,986 lines."""
    import logging

    caplog.set_level(logging.INFO, logger="attnkit.access")
    client = server(names=("sentiment",))
    client.get("/a%0aINFO:%20%20%20%20%20GET%20/forged%20200%201.0%20ms%1b[31m%07%0d%c2%85")
    client.get("/b" + "%0a" * 3000)
    client.request("M" * 8000, "/healthz")
    lines = [r.getMessage() for r in caplog.records if r.name == "attnkit.access"]
    assert len(lines) == 3 and all("\n" not in line and "\r" not in line for line in lines)
    assert lines[0].startswith("GET /a\\nINFO:     GET /forged 200 1.0 ms\\x1b[31m\\x07\\r"
                               "\\x85 404 ")
    assert lines[1].count("\\n") == 498 and "(2,502 more characters)" in lines[1]
    assert len(lines[2]) < 100


def test_a_stream_nobody_reads_does_not_stall_other_requests(server):
    client = server()
    with client.stream("POST", "/v1/translate/stream", json={"text": "I am cold."}) as r:
        assert r.status_code == 200
        other = client.post("/v1/translate", json={"texts": ["The cat does not see her."]})
        assert other.status_code == 200


def test_a_plugin_app_is_served_by_the_generic_route(monkeypatch, tmp_path, one_thread):
    """The example app of examples/reverse_app, registered as a package would register it."""
    from fastapi.testclient import TestClient

    from attnkit.apps import registry
    from attnkit.server.app import create_app
    from attnkit.server.options import ServeOptions, parse_run

    example = Path(__file__).resolve().parents[2] / "examples" / "reverse_app"
    monkeypatch.syspath_prepend(str(example))
    import attnkit_reverse

    monkeypatch.setitem(registry.APPS._extra, "reverse", attnkit_reverse.APP)
    tiny = attnkit_reverse.APP.tiny(tmp_path)
    attnkit_reverse.APP.train(tiny.settings, tmp_path / "rev", log=lambda _: None)
    options = ServeOptions(runs=[parse_run(f"rev={tmp_path / 'rev'}")],
                           allowed_hosts=("testserver",))
    with TestClient(create_app(options)) as c:
        assert c.get("/v1/models").json()["models"][0]["app"] == "reverse"
        r = c.post("/v1/predict", json={"run": "rev", "texts": tiny.inputs, "page": True})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["app"] == "reverse" and len(body["predictions"]) == len(tiny.inputs)
        assert body["page"].startswith("<!DOCTYPE html>")
        error(c.post("/v1/translate", json={"texts": ["x"], "run": "rev"}), 422, "wrong_app")


def test_a_run_without_attention_says_so(loaded_runs, one_thread):
    """A CTranslate2 export (or a model trained without attention) computes none: asking for
    it is a 422 naming the run; without it the run answers (no <unk> replacement)."""
    from dataclasses import replace

    from fastapi.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.options import RunSpec, ServeOptions
    from attnkit.server.state import ServedRun

    t = loaded_runs["translate"]

    class NoAttention:
        """Stands for the CTranslate2 engine: no attention, no stream."""

        name, has_attention, pipeline = "ctranslate2", False, t.loaded.engine.pipeline
        asked = []

        def translate(self, sentences, **options):
            self.asked.append(options)
            return t.loaded.engine.translate(sentences, **{**options, "attention": False})

    engine = NoAttention()
    runs = {"ct2": ServedRun("ct2", t.app, replace(t.loaded, engine=engine), None)}
    app = create_app(ServeOptions(runs=[RunSpec("ct2", t.loaded.path)],
                                  allowed_hosts=("testserver",)), runs)
    with TestClient(app) as client:
        for body in ({"texts": ["x"], "attention": True}, {"texts": ["x"], "page": True}):
            assert "'ct2'" in error(client.post("/v1/translate", json=body), 422,
                                    "no_attention")
        ok = client.post("/v1/translate", json={"texts": ["I am cold."]})
        assert ok.status_code == 200 and ok.json()["translations"][0]["weights"] is None
        assert engine.asked[-1]["unk_replace"] is False
        error(client.post("/v1/translate/stream", json={"text": "x"}), 422, "cannot_stream")


def test_a_subword_run_answers_in_whole_words_and_warns_on_what_it_cannot_read(
        number_pairs, tmp_path, one_thread):
    """The API's tokens and its stream show words, never sentencepiece's ``▁`` pieces; text
    of words the run never read gets its warning in the answer."""
    pytest.importorskip("sentencepiece")
    from fastapi.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.options import ServeOptions, parse_run

    APPS["translate"].train(str(number_pairs(tmp_path / "pairs.tsv", seed=5)), tmp_path / "sub",
                            hidden=16, emb_dim=8, epochs=2, batch_size=16, subword=40,
                            max_minutes=None, progress=False, examples=1, log=lambda _: None)
    options = ServeOptions(runs=[parse_run(f"sub={tmp_path / 'sub'}")],
                           allowed_hosts=("testserver",))
    with TestClient(create_app(options)) as c:
        r = c.post("/v1/translate", json={"texts": ["one two three .", "Xqzt plorvk wenthu ."],
                                          "attention": True, "page": True})
        assert r.status_code == 200, r.text
        assert "\u2581" not in r.text
        known, gibberish = r.json()["translations"]
        assert known["source_tokens"] == ["one", "two", "three", "."]
        assert len(known["weights"]) == len(known["tokens"]) == len(known["text"].split())
        assert known["unknown"] == 0 and known["unknown_words"] == []
        assert gibberish["unknown_words"] == ["xqzt", "plorvk", "wenthu"]
        assert gibberish["warning"].startswith("3 of the 3 words it read are unknown to the run")
        events = _events(c, {"text": "one two three ."})
        assert "\u2581" not in json.dumps(events, ensure_ascii=False)
        words = [data["token"] for name, data in events if name == "token"]
        final = next(data for name, data in events if name == "final")["translation"]
        assert words == final["tokens"] and final["warning"] == known["warning"]


@pytest.mark.parametrize("mode", ["auto", "on", "off"])
def test_a_transformer_run_switches_to_compiled_decoding(compiled_translate_run, monkeypatch,
                                                         mode):
    """#44: the server answers at once eagerly, loads (or builds) the compiled decoder in the
    background and switches, saying so in /v1/models; ``on`` has it before the first answer,
    ``off`` never."""
    import time

    from fastapi.testclient import TestClient

    from attnkit.server.app import create_app
    from attnkit.server.options import RunSpec, ServeOptions

    run, cache = compiled_translate_run
    monkeypatch.setenv("ATTNKIT_CACHE", str(cache))
    app = create_app(ServeOptions(runs=[RunSpec("tf", run)], compile=mode,
                                  allowed_hosts=("testserver",)))
    body = {"texts": ["one two three .", "four five ."]}
    with TestClient(app) as c:
        first = c.post("/v1/translate", json=body)
        assert first.status_code == 200, first.text
        want = "eager" if mode == "off" else "compiled"
        deadline = time.monotonic() + 120
        while c.get("/v1/models").json()["models"][0]["decoding"] != want:
            assert mode == "auto" and time.monotonic() < deadline
            time.sleep(0.1)
        again = c.post("/v1/translate", json=body).json()["translations"]
        assert [t["text"] for t in again] == [t["text"] for t in first.json()["translations"]]
