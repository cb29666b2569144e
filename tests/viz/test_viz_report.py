import base64
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from attnkit.viz import HtmlReport, alignment_svg, plot_alignment, shade_text_html


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.srcs += [v for k, v in attrs if k in ("src", "href")]


def test_report_is_self_contained_and_escaped(tmp_path):
    fig = plot_alignment(np.eye(3), list("abc"), list("xyz"))
    r = HtmlReport("Run <1> & co")
    r.add_section("Heat <map>", alignment_svg(np.eye(2), ["p", "q"], ["r", "s"]))
    r.add_text("line one\n<script>alert(1)</script>")
    r.add_tokens(shade_text_html(["a", "<b>"], [0.2, 1.0]))
    r.add_figure(fig, caption='the "alignment"')
    r.add_figure(np.zeros((8, 8, 3), np.uint8), caption="raw image")
    r.add_table([["bleu", 27.1], ["<x>", 1]], header=["metric", "value"])
    path = r.write(tmp_path / "out" / "report.html")
    text = path.read_text(encoding="utf-8")

    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "Run &lt;1&gt; &amp; co" in text and "Heat &lt;map&gt;" in text
    assert "&lt;x&gt;" in text and "line one<br>" in text
    p = _Collect()
    p.feed(text)
    assert "script" not in p.tags and "link" not in p.tags
    assert p.srcs and all(s.startswith("data:image/png;base64,") for s in p.srcs)
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?://", text)
    for s in p.srcs:
        assert base64.b64decode(s.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert text.count("<svg") == 1
    assert [f.name for f in path.parent.iterdir()] == ["report.html"]  # no temp file left


def test_bad_inputs():
    r = HtmlReport("t")
    with pytest.raises(ValueError, match="uint8"):
        r.add_figure(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="<svg>"):
        r.add_svg("not svg")
