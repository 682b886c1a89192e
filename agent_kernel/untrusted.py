"""The envelope around untrusted text: content the model reads as data, never as orders.

Web pages, search results, MCP results, files the agent fetched, and anything kept after
the agent had read such content reach the model inside ``<untrusted_content>`` tags the
system prompt explains. The text inside cannot close the envelope early: anything in it
that looks like the tag is neutralised first.
"""

from __future__ import annotations

import re

__all__ = ["UNTRUSTED_TAG", "mark_untrusted", "neutralise"]

UNTRUSTED_TAG = "untrusted_content"
_TAG_IN_TEXT = re.compile(UNTRUSTED_TAG, re.IGNORECASE)


def neutralise(text: str) -> str:
    """``text`` with every spelling of the envelope's tag altered so it cannot close it."""
    return _TAG_IN_TEXT.sub("untrusted-content", text)


def mark_untrusted(text: str, source: str) -> str:
    """``text`` inside the envelope that tells the model it is data, not instructions."""
    quoted = neutralise(source).replace('"', "%22").replace("\n", " ")
    return f'<{UNTRUSTED_TAG} source="{quoted}">\n{neutralise(text)}\n</{UNTRUSTED_TAG}>'
