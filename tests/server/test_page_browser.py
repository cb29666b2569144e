"""The live page and the API docs in a real browser: Playwright driving Debian's Chromium
against ``attnkit serve`` on loopback. Type a sentence: the translation streams in and its
heatmap grows a row per token, then the explorer view shows it; a review and an image too; no
console error, and no request leaves this server.

Run just these with ``pytest -m browser``; they skip when ``playwright`` or a ``chromium``
executable is missing (``scripts/test.sh`` installs chromium when it runs as root).
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the serve extra is missing")
pytest.importorskip("uvicorn", reason="the serve extra is missing")
pytest.importorskip("playwright.sync_api", reason="the playwright package is missing")

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# What the live grid's body went through: per change, the rows it added (each a TR); per
# delivery of changes, the rows it then had. The test reads them afterwards.
WATCH_ROWS = """() => {
  window.__added = []; window.__seen = [];
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.target.tagName === "TBODY") {
        window.__added.push([...r.addedNodes].map((n) => n.tagName).join(","));
      }
    }
    const body = document.querySelector("#live tbody");
    window.__seen.push(body ? body.rows.length : 0);
  }).observe(document.getElementById("live"), {childList: true, subtree: true});
}"""
# A long sentence (one: the grid shows one sentence at a time): the tiny translator writes many
# tokens for it (up to its length limit).
SENTENCE = ", ".join(["The cat does not see her and your tired dogs will not find the old "
                      "teacher"] * 4) + " ."



@pytest.fixture(scope="module")
def live_server(serve_process, tiny_runs):
    args = []
    for name, (path, _) in tiny_runs.items():
        args += ["--run", f"{name}={path}"]
    with serve_process.ServeProcess(*args, "--threads", "1") as srv:
        yield srv


class Visit:
    """A page of the server, with everything it asked the network for and logged."""

    def __init__(self, browser, url: str):
        self.page = browser.new_page(viewport={"width": 1200, "height": 900})
        self.requests, self.errors = [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)

    def check_clean(self, origin: str) -> None:
        assert self.errors == []
        # Only this server (and the frame's inline document): nothing leaves the host.
        assert self.requests and all(u.startswith((origin + "/", "about:", "data:", "blob:"))
                                     for u in self.requests), self.requests

    def wait_in_frame(self, selector: str) -> None:
        """Wait for ``selector`` in the explorer frame (a minute: a loaded machine starts the
        sandboxed frame's renderer slowly); if it never comes, fail saying what the frame was
        given and what the page logged (asked of the page itself: the frame may not answer)."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.page.frame_locator("#explorer").locator(selector).first.wait_for(
                state="attached", timeout=60_000)
        except PlaywrightTimeout:
            shown = self.page.eval_on_selector("#explorer",
                                               "f => [f.hidden, (f.srcdoc || '').length]")
            pytest.fail(f"no {selector} in the explorer frame: (hidden, srcdoc length) "
                        f"{shown}, frames {[f.url for f in self.page.frames]}, "
                        f"errors {self.errors}")

    def run(self, run: str) -> None:
        self.page.select_option("#run", label=run)
        self.page.click("#go")
        self.page.wait_for_function(
            "() => document.getElementById('status').textContent === 'done'", timeout=30_000)


def streamed_tokens(url: str, sentence: str) -> int:
    """How many tokens the served translator streams for ``sentence``: the rows the live grid
    must end with. Asked of the server itself, since how long the tiny model's answer is
    depends on the CPU it was trained on (its last bits differ between AVX2, AVX512 and AMX)."""
    import httpx

    with httpx.stream("POST", url + "/v1/translate/stream", timeout=60,
                      json={"text": sentence, "run": "translate"}) as r:
        r.raise_for_status()
        return sum(line == "event: token" for line in r.iter_lines())


def test_a_sentence_streams_into_a_growing_heatmap_then_the_explorer(browser, live_server):
    tokens = streamed_tokens(live_server.url, SENTENCE)
    assert tokens >= 2, f"the tiny translator streams {tokens} token(s): nothing to see grow"
    v = Visit(browser, live_server.url + "/")
    v.page.evaluate(WATCH_ROWS)
    # A slow network (20 kB/s): on loopback a tiny model's whole stream would arrive in one
    # read; at this speed its events arrive over a few reads, as they would from afar.
    cdp = v.page.context.new_cdp_session(v.page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                  "downloadThroughput": 20_000,
                                                  "uploadThroughput": -1})
    v.page.fill("#text", SENTENCE)
    v.run("translate (translate)")
    added, seen = v.page.evaluate("window.__added"), v.page.evaluate("window.__seen")
    rows = v.page.eval_on_selector_all("#live tbody tr", "e => e.length")
    cells = v.page.eval_on_selector_all("#live td", "els => els.map(e => e.style.backgroundColor)")
    n_src = v.page.eval_on_selector_all("#live thead th.col", "els => els.length")
    # A row per streamed token, each added on its own as its event came; the grid was seen
    # part-drawn (some rows, not yet all) before it was whole: it grew, it was not drawn once.
    assert rows == tokens and added == ["TR"] * rows, (rows, tokens, added)
    assert seen == sorted(seen) and seen[-1] == rows and any(0 < n < rows for n in seen), seen
    assert n_src >= 20 and len(cells) == rows * n_src and all(cells)
    assert v.page.inner_text("#answer").strip()
    # The explorer view of the whole answer (the static page's, in its frame) ran its script.
    frame = v.page.frame_locator("#explorer")
    frame.locator("#matrix td").first.wait_for(state="attached", timeout=30_000)
    assert frame.locator("#matrix td").count() == rows * n_src
    # One picture per answer: the grid is drawn on the explorer's scale (its whole matrix's
    # largest weight, not each row's), with the same colour bar; cells may differ by a shade
    # where the stream's rounded weights fall on a colour step.
    shown = frame.locator("#matrix td").evaluate_all(
        "els => els.map(e => e.style.backgroundColor)")
    assert sum(a == b for a, b in zip(cells, shown, strict=True)) >= 0.95 * len(cells)
    bar = v.page.inner_text("#live-bar")
    assert "0 (ignored)" in bar and "(most looked at)" in bar
    v.check_clean(live_server.url)
    v.page.close()


def test_a_review_and_an_image(browser, live_server, tiny_runs):
    v = Visit(browser, live_server.url + "/")
    v.page.fill("#text", "a superb film")
    v.run("sentiment (sentiment)")
    assert "P(positive)" in v.page.inner_text("#answer")
    v.wait_in_frame(".tok")
    v.page.select_option("#run", label="caption (caption)")
    assert v.page.is_visible("#drop") and not v.page.is_visible("#text")
    v.page.set_input_files("#file", tiny_runs["caption"][1][0])
    v.run("caption (caption)")
    assert v.page.inner_text("#answer").strip()
    v.wait_in_frame("img, canvas")
    v.check_clean(live_server.url)
    v.page.close()


def test_an_error_is_shown_not_thrown(browser, live_server):
    v = Visit(browser, live_server.url + "/")
    v.page.fill("#text", "x" * 2500)
    v.page.click("#go")
    v.page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('413')")
    assert "2,000" in v.page.inner_text("#status")
    # The browser logs the failed response itself; the page throws nothing.
    assert all("413" in e for e in v.errors), v.errors
    v.page.close()


def test_the_api_docs_work_offline(browser, live_server):
    """FastAPI's own docs (Swagger UI, its files served by this server): every route listed,
    and a stream tried from the page, with no request leaving the host."""
    v = Visit(browser, live_server.url + "/docs")
    v.page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    paths = v.page.eval_on_selector_all(".opblock-summary-path",
                                        "els => els.map(e => e.dataset.path)")
    assert {"/v1/translate", "/v1/translate/stream", "/healthz", "/metrics"} <= set(paths)
    block = v.page.locator(".opblock", has=v.page.locator(
        '.opblock-summary-path[data-path="/v1/translate/stream"]'))
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("button.execute").click()
    answer = block.locator(".live-responses-table").filter(has_text="event: final")
    answer.wait_for(timeout=30_000)
    assert "event: token" in answer.inner_text()
    v.check_clean(live_server.url)
    v.page.close()
