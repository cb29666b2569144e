import base64
import hashlib
import json
import re

import numpy as np
import pytest

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
from attnkit.viz.explorer import encode_weights, json_for_script, summary_html

XSS = ['<script>window.__pwned = 1</script>', '<img src=x onerror="window.__pwned = 2">']
DATA_RE = re.compile(r'<script type="application/json" id="attnkit-data">(.*?)</script>', re.S)
CODE_RE = re.compile(r"<script>(.*?)</script>", re.S)


def _data(page: str):
    return json.loads(DATA_RE.search(page).group(1))


def _softmax(rng, shape):
    a = np.exp(rng.normal(size=shape) * 2)
    return a / a.sum(-1, keepdims=True)


def _check_self_contained(page: str):
    """One data block, one code block, locked by a CSP hash; no user markup, no network."""
    assert page.count("<script") == 2 and len(DATA_RE.findall(page)) == 1
    code = CODE_RE.findall(page)
    assert len(code) == 1
    digest = base64.b64encode(hashlib.sha256(code[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page and "default-src 'none'" in page
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "@import" not in page and "url(http" not in page
    for bad in ("<script>window", "<img src=x", "</b>"):  # "<" only escaped
        assert bad not in page


def test_json_for_script_cannot_close_the_script_and_round_trips():
    obj = {"t": "</script><!-- & \u2028 <b>", "n": [1, 2.5]}
    text = json_for_script(obj)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == obj
    with pytest.raises(ValueError):
        json_for_script({"x": float("nan")})


def test_encode_weights_round_trips_within_one_step():
    w = np.random.default_rng(0).random((3, 4, 5)) * 0.3
    enc = encode_weights(w)
    q = np.frombuffer(base64.b64decode(enc["b64"]), dtype="<u2").astype(float)
    back = q / 65535 * enc["scale"]
    assert np.abs(back - w.ravel()).max() <= enc["scale"] / 65535
    with pytest.raises(ValueError, match=">= 0"):
        encode_weights(np.array([0.5, -0.1]))
    with pytest.raises(ValueError, match="NaN"):
        encode_weights(np.array([np.nan]))


def test_summary_box_escapes_keys_and_values():
    out = summary_html({"<k>": "a & <b>", "sizes": {"d": 256, "<v>": 0.1 + 0.2},
                        "parameters": 561695, "bleu": 100.00000000000004})
    assert "&lt;k&gt;" in out and "a &amp; &lt;b&gt;" in out and "<b>" not in out
    # A reader's numbers: separators, no float noise, a mapping as pairs (not a JSON dump).
    assert "d: 256, &lt;v&gt;: 0.3" in out and "561,695" in out and ">100<" in out
    assert summary_html(None) == ""


def test_translation_page_data_escaping_and_atomic_write(tmp_path):
    rng = np.random.default_rng(1)
    src, tgt = ["the", XSS[0], "</b>"], ["le", XSS[1]]
    ex = TranslationExample(src, tgt, _softmax(rng, (2, 4, 2, 3)), references=["ref <i>"],
                            scores={"chrF": 50})
    rnn = {"source_tokens": ["a"], "target_tokens": ["b", "c"], "attention": np.ones((2, 1))}
    path = tmp_path / "out" / "t.html"
    page = translation_page([ex, rnn], {"model": "<transformer>"}, path, metrics={"BLEU": 1})
    assert path.read_text(encoding="utf-8") == page
    assert [p.name for p in path.parent.iterdir()] == ["t.html"]  # no temp file left
    _check_self_contained(page)
    assert "&lt;transformer&gt;" in page
    d = _data(page)
    assert d["examples"][0]["src"] == src and d["examples"][0]["tgt"] == tgt
    assert (d["examples"][0]["L"], d["examples"][0]["H"]) == (2, 4)
    assert (d["examples"][1]["L"], d["examples"][1]["H"]) == (1, 1)  # an RNN: no selector
    assert d["examples"][0]["refs"] == ["ref <i>"] and d["metrics"] == [["BLEU", "1"]]


def test_translation_shape_errors_name_the_counts():
    with pytest.raises(ValueError, match=r"T_tgt = 2 target tokens and T_src = 3"):
        translation_page([TranslationExample(list("abc"), list("xy"), np.ones((3, 2)))], {})
    with pytest.raises(ValueError, match="at least one example"):
        translation_page([], {})
    with pytest.raises(ValueError, match="unexpected keyword"):
        translation_page([{"source": ["a"]}], {})


def test_sentiment_page_shows_the_text_as_written():
    text = "Not BAD at all!<br /><br />" + XSS[0] + " " + XSS[1]
    tokens = WordTokenizer().tokenize(text)
    contrib = np.linspace(-1, 1, len(tokens))
    r = Review(text, tokens, 0.8, [TokenView("contribution", contrib, signed=True),
                                   {"name": "head 1", "values": np.abs(contrib)}])
    page = sentiment_page([r], {"model": "bilstm"})
    _check_self_contained(page)
    rev = _data(page)["reviews"][0]
    shown = "".join(piece for piece, _ in rev["segments"])
    assert shown == text.replace("<br /><br />", "\n\n")
    marked = [(piece, i) for piece, i in rev["segments"] if i >= 0]
    assert marked[:3] == [("Not", 0), ("BAD", 1), ("at", 2)]
    assert [v["signed"] for v in rev["views"]] == [True, False] and rev["missing"] == []


def test_pages_say_their_pickers_are_below_and_weights_read_as_no_direction():
    """The legend comes first, so the pickers are below it; a weight view is shaded in greys,
    never in the red that the legend makes mean "towards negative"."""
    r = Review("a b", ["a", "b"], 0.8, [TokenView("share", [0.2, 0.8])])
    pages = [sentiment_page([r], {}),
             translation_page([TranslationExample(["a"], ["b"], np.ones((2, 2, 1, 1)))], {})]
    for page in pages:
        assert page.index('class="legend"') < page.index('class="controls"')
        assert " below" in page and "above;" not in page and "head above" not in page
    data = _data(pages[0])
    lut = bytes.fromhex(data["palettes"][data["weights"]])
    rgb = np.frombuffer(lut, np.uint8).reshape(-1, 3).astype(int)
    assert (rgb.max(axis=1) - rgb.min(axis=1)).max() <= 2          # greys only


def test_sentiment_errors():
    with pytest.raises(ValueError, match=r"\[T\] = \[2\]"):
        sentiment_page([Review("a b", ["a", "b"], 0.5, [TokenView("v", [1.0])])], {})
    with pytest.raises(ValueError, match="signed=True"):
        sentiment_page([Review("a b", ["a", "b"], 0.5, [TokenView("v", [1.0, -1.0])])], {})
    with pytest.raises(ValueError, match="prob"):
        sentiment_page([Review("a", ["a"], 1.5, [TokenView("v", [1.0])])], {})
    with pytest.raises(ValueError, match="overlaps"):
        sentiment_page([Review("ab", ["a", "b"], 0.5, [TokenView("v", [1.0, 1.0])],
                               spans=[(0, 2), (1, 2)])], {})


def test_caption_page_embeds_a_png_and_the_maps():
    img = np.random.default_rng(2).integers(0, 256, (500, 300, 3), dtype=np.uint8)
    words = ["a", XSS[0], "dog"]
    maps = _softmax(np.random.default_rng(3), (3, 49)).reshape(3, 7, 7)
    page = caption_page([CaptionExample(img, words, maps)], {"model": "sat"})
    _check_self_contained(page)
    d = _data(page)["images"][0]
    assert d["words"] == words and (d["h"], d["w"]) == (7, 7)
    png = base64.b64decode(d["png"].split(",", 1)[1])
    assert d["png"].startswith("data:image/png;base64,") and png.startswith(b"\x89PNG")
    with pytest.raises(ValueError, match=r"n = len\(words\) = 2"):
        caption_page([CaptionExample(img, ["a", "b"], maps)], {})
    with pytest.raises(ValueError, match=r"uint8 \[H, W, 3\]"):
        caption_page([CaptionExample(img.astype(float), words, maps)], {})


def test_pages_for_a_50_word_input_stay_under_2_mb():
    rng = np.random.default_rng(4)
    words = [f"word{i}" for i in range(50)]
    t = translation_page([TranslationExample(words, words, _softmax(rng, (6, 8, 50, 50)))], {})
    text = " ".join(words)
    views = [TokenView(f"head {h}", _softmax(rng, 50)) for h in range(8)]
    s = sentiment_page([Review(text, words, 0.3, views)], {})
    noise = rng.integers(0, 256, (1024, 1024, 3), dtype=np.uint8)  # worst case for PNG
    c = caption_page([CaptionExample(noise, words, _softmax(rng, (50, 196)).reshape(50, 14, 14))],
                     {})
    sizes = [len(p.encode("utf-8")) for p in (t, s, c)]
    assert max(sizes) < 2_000_000, sizes


def test_every_page_file_ships_as_package_data():
    """The pages' HTML, CSS and JS are files beside the modules: pyproject must ship each."""
    import fnmatch
    from pathlib import Path

    import attnkit

    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    root = Path(attnkit.__file__).parent
    shipped = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())["tool"][
        "setuptools"]["package-data"]
    pages = [p for p in root.rglob("*") if p.suffix in (".html", ".css", ".js")]
    assert len(pages) >= 14
    for page in pages:
        package = ".".join(page.parent.relative_to(root.parent).parts)
        assert any(fnmatch.fnmatch(page.name, g) for g in shipped.get(package, ())), page
