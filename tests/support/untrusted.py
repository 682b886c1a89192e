"""Reading text as a lenient reader would, to find anything it could take for the untrusted envelope's tags."""

from __future__ import annotations

import html
import re
import unicodedata

from confusable_homoglyphs.confusables import confusables_data

LETTERS = "untrustedcontent"


LOOK_ALIKES = {
    entry["c"]: char.lower()
    for char in {*LETTERS, *LETTERS.upper(), "<", ">", "/"}
    for entry in confusables_data.get(char, ())
    if len(entry["c"]) == 1
}


TAG = re.compile("<(/*)" + "/*".join(LETTERS))


ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")


def decoded(text: str) -> str:
    text = ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
    while (unescaped := html.unescape(text)) != text:
        text = unescaped
    return text


def folded(text: str) -> str:
    kept = []
    for char in decoded(text):
        for part in unicodedata.normalize("NFKD", LOOK_ALIKES.get(char, char)):
            part = LOOK_ALIKES.get(part, part)
            if part in "<>/" or unicodedata.category(part)[0] not in "CMZPS":
                kept.append(part.lower())
    return "".join(kept)


def envelope_tags(text: str) -> list[str]:
    """Every tag a lenient reader could take for the envelope's, in order."""
    return ["close" if m.group(1) else "open" for m in TAG.finditer(folded(text))]
