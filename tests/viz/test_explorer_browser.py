"""The explorer pages in a real browser: Playwright driving Debian's Chromium (headless).

Run just these with ``pytest -m browser``. They skip when the ``playwright`` package or a
``chromium`` executable is missing (``scripts/test.sh`` installs chromium when it runs as root).
"""

import io

import numpy as np
import pytest
from PIL import Image

from attnkit.data.classification_text import WordTokenizer
from attnkit.viz import (
    CaptionExample,
    Review,
    TokenView,
    TranslationExample,
    caption_page,
    sentiment_page,
    translation_page,
)

pytestmark = pytest.mark.browser

pytest.importorskip("playwright.sync_api", reason="the playwright package is missing")

XSS_TEXT = ("<script>window.__pwned = 1; alert(1)</script> Awful <img src=x "
            "onerror=\"window.__pwned = 2; alert(2)\"> film, avoid.")



class Visit:
    """A page opened from a file, with everything it asked the network for and logged."""

    def __init__(self, browser, path):
        self.page = browser.new_page(viewport={"width": 1200, "height": 900})
        self.requests, self.errors, self.dialogs = [], [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.as_uri())

    def check_clean(self):
        assert self.errors == [] and self.dialogs == []
        assert self.requests and all(u.startswith(("file://", "data:")) for u in self.requests)
        shot = Image.open(io.BytesIO(self.page.screenshot(full_page=True))).convert("RGB")
        assert len(np.unique(np.asarray(shot).reshape(-1, 3), axis=0)) > 50  # not blank

    def bg(self, selector):
        return self.page.eval_on_selector_all(
            selector, "els => els.map(e => getComputedStyle(e).backgroundColor)")


def _luma(css: str) -> float:
    r, g, b = (float(x) for x in css[css.index("(") + 1:css.index(")")].split(",")[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# ---------------------------------------------------------------- translation

@pytest.fixture(scope="module")
def translation_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    src, tgt = ["the", "black", "cat", "<b>sat</b>"], ["le", "chat", "noir", "s'assit"]
    att = rng.random((2, 3, 4, 4)) * 0.1
    att[..., [0, 1, 2, 3], [0, 2, 1, 3]] += 1.0  # the reordering: chat<-cat, noir<-black
    att[1, 1] = att[1, 1][:, ::-1]  # head 2 of the last layer reads backwards
    att /= att.sum(-1, keepdims=True)
    long = TranslationExample([f"s{i}" for i in range(200)], [f"t{i}" for i in range(200)],
                              np.eye(200) * 0.9 + 0.1 / 200)
    path = tmp_path_factory.mktemp("pages") / "translate.html"
    translation_page([TranslationExample(src, tgt, att, references=["le chat noir"]), long],
                     {"model": "transformer"}, path, metrics={"BLEU": 12.5})
    return path


def test_translation_page_loads_clean_and_head_switch_changes_the_grid(browser,
                                                                       translation_file):
    v = Visit(browser, translation_file)
    v.check_clean()
    before = v.bg("#matrix td")
    assert len(before) == 16 and len(set(before)) > 2
    v.page.select_option("#head", "1")
    after = v.bg("#matrix td")
    assert after != before
    v.page.select_option("#layer", "0")
    assert v.bg("#matrix td") != after
    v.page.close()


def test_translation_focus_and_hover_shade_the_aligned_words(browser, translation_file):
    v = Visit(browser, translation_file)
    v.page.focus("#tgt-line .tok >> nth=1")  # "chat" (keyboard)
    lumas = [_luma(c) for c in v.bg("#src-line .tok")]
    assert int(np.argmin(lumas)) == 2  # "cat" is the darkest source word
    assert "cat" in v.page.inner_text("#readout")
    v.page.hover("#src-line .tok >> nth=1")  # "black" (mouse): the reverse direction
    lumas = [_luma(c) for c in v.bg("#tgt-line .tok")]
    assert int(np.argmin(lumas)) == 2  # "noir"
    v.page.keyboard.press("Tab")
    v.page.close()


def test_translation_long_input_scrolls_inside_its_box(browser, translation_file):
    v = Visit(browser, translation_file)
    v.page.select_option("#example", "1")
    box = v.page.eval_on_selector(
        ".matrix-wrap", "e => [e.clientWidth, e.clientHeight, e.scrollWidth, e.scrollHeight]")
    assert box[1] <= 900 and box[0] <= 1200  # the grid stays inside the screen
    assert box[2] > 2000 and box[3] > 2000  # and scrolls: 200 words are all there
    assert not v.page.is_visible("#head-box")  # a one-head example shows no selector
    v.check_clean()
    v.page.close()


@pytest.fixture(scope="module")
def methods_file(tmp_path_factory):
    src, tgt = ["the", "black", "cat"], ["le", "chat", "noir"]
    att = np.full((2, 2, 3, 3), 1 / 3)                  # attention: flat, says nothing
    ig = np.array([[0.9, 0.05, 0.05], [0.05, 0.05, 0.9], [0.05, 0.9, 0.05]])
    path = tmp_path_factory.mktemp("pages") / "methods.html"
    translation_page([TranslationExample(src, tgt, att, methods={"integrated-gradients": ig},
                                         links=[(0, 0), (2, 1), (1, 2)])],
                     {"model": "transformer"}, path)
    return path


def test_translation_method_switch_and_alignment_links(browser, methods_file):
    v = Visit(browser, methods_file)
    v.check_clean()
    assert v.page.is_visible("#method-box") and v.page.is_visible("#head-box")
    flat = v.bg("#matrix td")
    assert len(set(flat)) == 1                                   # uniform attention
    v.page.select_option("#method", "integrated-gradients")
    assert not v.page.is_visible("#head-box") and not v.page.is_visible("#layer-box")
    cells = v.bg("#matrix td")
    assert cells != flat and _luma(cells[5]) < _luma(cells[4])  # chat <- cat is the darkest
    assert len(v.page.query_selector_all("#matrix td.link")) == 3
    v.page.hover("#tgt-line .tok >> nth=1")                      # "chat": linked to "cat"
    linked = v.page.eval_on_selector_all("#src-line .tok", "els => els.map(e => "
                                         "e.classList.contains('linked'))")
    assert linked == [False, False, True]
    assert "aligned with: cat" in v.page.inner_text("#readout")
    v.page.select_option("#method", "attention")
    assert v.bg("#matrix td") == flat and v.page.is_visible("#head-box")
    v.page.close()


def test_translation_page_opens_on_the_first_method_of_its_order(browser, tmp_path):
    src, tgt = ["the", "cat"], ["le", "chat"]
    path = tmp_path / "t.html"
    translation_page([TranslationExample(src, tgt, np.full((2, 2), 0.5),
                                         methods={"rollout": np.eye(2)})],
                     {"model": "transformer"}, path, order=("rollout", "attention"))
    v = Visit(browser, path)
    v.check_clean()
    assert v.page.input_value("#method") == "rollout"
    assert len(set(v.bg("#matrix td"))) == 2                     # the diagonal, not uniform
    v.page.close()


# ---------------------------------------------------------------- sentiment

@pytest.fixture(scope="module")
def sentiment_file(tmp_path_factory):
    tok = WordTokenizer()
    good = "A GREAT film.<br /><br />Not boring, not bad."
    reviews = []
    # The markup review's tokens leave its tags whole in the gaps between words: the page must
    # still show them as text.
    for text, prob, tokens in ((good, 0.9, tok.tokenize(good)),
                               (XSS_TEXT, 0.1, ["awful", "film", "avoid"])):
        contrib = np.linspace(-1.0, 1.0, len(tokens))
        weights = np.linspace(1.0, 0.1, len(tokens))
        reviews.append(Review(text, tokens, prob, [TokenView("contribution", contrib, signed=True),
                                                   TokenView("attention", weights)]))
    path = tmp_path_factory.mktemp("pages") / "sentiment.html"
    sentiment_page(reviews, {"model": "bilstm"}, path)
    return path


def test_sentiment_page_view_switch_changes_the_shading(browser, sentiment_file):
    v = Visit(browser, sentiment_file)
    v.check_clean()
    text = v.page.inner_text("#text")
    assert "A GREAT film." in text and "Not boring, not bad." in text
    assert "positive" in v.page.inner_text("#verdict")
    signed = v.bg("#text .tok")
    assert _luma(signed[0]) < 200 and signed[0] != signed[-1]  # red start, blue end
    r0, _, b0 = (int(x) for x in signed[0][4:-1].split(","))
    assert r0 > b0  # the first (most negative) word is red
    v.page.select_option("#view", "1")
    assert v.bg("#text .tok") != signed
    assert "most weight" in v.page.inner_text("#bar")
    v.page.close()


def test_sentiment_method_switch(browser, tmp_path):
    tokens = ["a", "great", "film"]
    views = [TokenView("share", [0.2, 0.3, 0.5]),
             TokenView("pushes", [0.1, 0.8, -0.2], signed=True, method="integrated-gradients"),
             TokenView("pushes", [0.0, 0.9, 0.1], signed=True, method="grad-input")]
    sentiment_page([Review("a great film", tokens, 0.8, views)], {"model": "x"},
                   tmp_path / "s.html")
    v = Visit(browser, tmp_path / "s.html")
    v.check_clean()
    assert v.page.is_visible("#method-box") and not v.page.is_visible("#view-box")
    before = v.bg("#text .tok")
    v.page.select_option("#method", "integrated-gradients")
    after = v.bg("#text .tok")
    assert after != before and "towards" in v.page.inner_text("#bar")
    v.page.select_option("#method", "grad-input")
    assert v.bg("#text .tok") not in (before, after)
    v.page.close()


def test_sentiment_review_with_markup_shows_text_and_runs_nothing(browser, sentiment_file):
    v = Visit(browser, sentiment_file)
    v.page.select_option("#review", "1")
    v.page.wait_for_timeout(100)  # time for an injected handler to fire, were there one
    text = v.page.inner_text("#text")
    assert "<script>window.__pwned = 1; alert(1)</script>" in text
    assert '<img src=x onerror="window.__pwned = 2; alert(2)">' in text
    assert v.page.evaluate("window.__pwned") is None
    assert v.page.query_selector("#text img") is None and v.page.query_selector_all(
        "body script") and len(v.page.query_selector_all("script")) == 2
    v.check_clean()  # no dialog, no console error (a CSP refusal would log one)
    v.page.close()


# ---------------------------------------------------------------- caption

@pytest.fixture(scope="module")
def caption_file(tmp_path_factory):
    yy, xx = np.mgrid[0:128, 0:128]
    img = np.stack([xx * 2, yy * 2, 255 - xx], -1).astype(np.uint8)
    maps = np.full((3, 4, 4), 0.01)
    maps[0, 0, 0] = maps[1, 3, 3] = maps[2, 0, 3] = 1.0  # top-left, bottom-right, top-right
    path = tmp_path_factory.mktemp("pages") / "caption.html"
    caption_page([CaptionExample(img, ["a", "<b>dog</b>", "runs"], maps)], {"model": "sat"}, path)
    return path


def _peak(v) -> tuple[float, float]:
    """Where the overlay is brightest, as fractions (y, x) of the canvas."""
    return tuple(v.page.evaluate("""() => {
        const c = document.getElementById("heat"), d = c.getContext("2d")
            .getImageData(0, 0, c.width, c.height).data;
        let best = -1, at = 0;
        for (let i = 0; i < d.length; i += 4) {
            const y = d[i] + d[i + 1] + d[i + 2]; if (y > best) { best = y; at = i / 4; }
        }
        return [Math.floor(at / c.width) / c.height, (at % c.width) / c.width];
    }"""))


def test_caption_method_switch_moves_the_overlay(browser, tmp_path):
    img = np.full((64, 64, 3), 128, np.uint8)
    att = np.full((1, 4, 4), 0.01)
    att[0, 0, 0] = 1.0                                              # attention: top-left
    ig = np.full((1, 4, 4), 0.01)
    ig[0, 3, 3] = 1.0                                               # gradients: bottom-right
    caption_page([CaptionExample(img, ["duck"], att, methods={"integrated-gradients": ig})],
                 {"model": "sat"}, tmp_path / "c.html")
    v = Visit(browser, tmp_path / "c.html")
    v.check_clean()
    y, x = _peak(v)
    assert y < 0.3 and x < 0.3
    v.page.select_option("#method", "integrated-gradients")
    y, x = _peak(v)
    assert y > 0.7 and x > 0.7
    assert "integrated-gradients" in v.page.inner_text("#readout")
    v.page.close()


def test_caption_page_opens_on_the_first_method_of_its_order(browser, tmp_path):
    img = np.full((64, 64, 3), 128, np.uint8)
    att, ig = np.full((1, 4, 4), 0.01), np.full((1, 4, 4), 0.01)
    att[0, 0, 0], ig[0, 3, 3] = 1.0, 1.0                  # attention top-left, gradients not
    caption_page([CaptionExample(img, ["duck"], att, methods={"integrated-gradients": ig})],
                 {"model": "sat"}, tmp_path / "c.html",
                 order=("integrated-gradients", "attention"), note="Shown first: because.")
    v = Visit(browser, tmp_path / "c.html")
    v.check_clean()
    assert v.page.input_value("#method") == "integrated-gradients"
    y, x = _peak(v)
    assert y > 0.7 and x > 0.7
    assert "Shown first: because." in v.page.inner_text("body")
    v.page.close()


def test_caption_word_buttons_slider_and_keys_move_the_overlay(browser, caption_file):
    v = Visit(browser, caption_file)
    v.check_clean()
    y, x = _peak(v)
    assert y < 0.3 and x < 0.3  # "a": top-left
    v.page.click("#words button >> nth=1")
    y, x = _peak(v)
    assert y > 0.7 and x > 0.7  # "<b>dog</b>": bottom-right
    assert v.page.inner_text("#words button >> nth=1") == "<b>dog</b>"
    v.page.keyboard.press("ArrowRight")  # keyboard: the next word
    assert v.page.get_attribute("#words button >> nth=2", "aria-pressed") == "true"
    y, x = _peak(v)
    assert y < 0.3 and x > 0.7  # "runs": top-right
    v.page.focus("#step")
    v.page.keyboard.press("Home")  # the slider
    assert v.page.get_attribute("#words button >> nth=0", "aria-pressed") == "true"
    assert "peak" in v.page.inner_text("#bar")
    v.page.uncheck("#show")
    assert _peak(v) == (0.0, 0.0)  # overlay cleared: the plain image
    v.page.close()
