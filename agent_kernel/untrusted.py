"""The envelope around untrusted text: content the model reads as data, never as orders.

Web pages, search results, MCP results, files the agent fetched, and anything kept after
the agent had read such content reach the model inside ``<untrusted_content>`` tags the
system prompt explains. The text inside cannot open or close an envelope of its own:
:func:`neutralise` turns the brackets of anything a model could read as that tag into
``[`` and ``]``.

"Anything a model could read as the tag" is an opening bracket followed by the tag's
letters, however they are spelled: in any case, with whitespace, punctuation or invisible
characters between them or before them (``< /untrusted - content>``), as HTML entities or
``\\u`` escapes (``&lt;/untrusted_content&gt;``), in compatibility forms (fullwidth
letters, ligatures, accents) or in letters of other scripts that look the same (Unicode's
confusables, from ``confusable_homoglyphs``). The matching reads each character folded
that way; the text itself is left as it was apart from the replaced brackets.

It runs on every fetched page (up to megabytes): a regular expression finds the few
brackets worth a closer look, so ordinary text costs one scan.
"""

from __future__ import annotations

import html
import re
import unicodedata
from functools import lru_cache

__all__ = ["UNTRUSTED_TAG", "mark_untrusted", "neutralise"]

UNTRUSTED_TAG = "untrusted_content"
# The tag's letters as the matching folds them (everything between them is skipped).
TAG_LETTERS = "untrustedcontent"
# How far after the tag's name its closing bracket is looked for (past any attributes).
ATTRIBUTES_CHARS = 256
# The replacements of a neutralised tag's brackets.
OPEN_ESCAPE, CLOSE_ESCAPE = "[", "]"

# Characters whose compatibility decomposition is a bracket (with a mark): the small and
# fullwidth forms, and "not less/greater than"; look-alikes come from the confusables data.
_COMPAT_OPEN, _COMPAT_CLOSE = "\ufe64\uff1c\u226e", "\ufe65\uff1e\u226f"
# The ASCII characters the matching skips (all but letters, digits, brackets, & and \).
_ASCII_SKIPPED = r"\x00-\x25\x27-\x2f\x3a\x3b\x3d\x3f\x40\x5b\x5d-\x60\x7b-\x7f"
_ASCII_GAP = f"[{_ASCII_SKIPPED}]*"
# One entity or escape, decoded as a unit while the letters are read: the character
# references html.unescape reads (a chain of &amp; first; a name's letters and digits only,
# so one never spans a bracket), and \uXXXX / \xXX escapes.
_ENTITY = re.compile(r"&(?:amp;)*(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]{0,31};?)")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|U([0-9a-fA-F]{8}))")


def neutralise(text: str) -> str:
    """``text`` with the brackets of every spelling of the envelope's tag replaced.

    An opening bracket (``<``, ``&lt;``, ``\\u003c``, a look-alike) followed by the tag's
    letters becomes ``[``, and the closing bracket after the tag's name, if any, ``]``.
    """
    patterns = _patterns()
    pieces: list[str] = []
    done = 0
    for start, after in patterns.openers(text):
        if start < done:
            continue
        spelled = patterns.ascii_name.match(text, after)
        name_end, more = (spelled.end(), []) if spelled is not None else _tag_name_end(text, after)
        if name_end < 0:
            continue
        for bracket_start, bracket_end in [(start, after), *more]:
            pieces += [text[done:bracket_start], OPEN_ESCAPE]
            done = bracket_end
        bracket = patterns.bracket.search(text, name_end, min(len(text), name_end + ATTRIBUTES_CHARS))
        if bracket is not None and bracket.lastgroup == "close":
            pieces += [text[done : bracket.start()], CLOSE_ESCAPE]
            done = bracket.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def mark_untrusted(text: str, source: str) -> str:
    """``text`` inside the envelope that tells the model it is data, not instructions."""
    quoted = neutralise(source)
    for char, code in (('"', "%22"), ("<", "%3C"), (">", "%3E"), ("\n", " "), ("\r", " ")):
        quoted = quoted.replace(char, code)
    return f'<{UNTRUSTED_TAG} source="{quoted}">\n{neutralise(text)}\n</{UNTRUSTED_TAG}>'


# -- reading the tag's letters ------------------------------------------------------------


def _tag_name_end(text: str, start: int) -> tuple[int, list[tuple[int, int]]]:
    """Where the tag's name ends when the text from ``start`` (just after an opening
    bracket) spells it, else -1; and the spans of further opening brackets before its
    first letter (``<<``: each would open the tag once the one before it is replaced).
    Slashes and anything that folds to nothing are skipped."""
    wanted = 0
    more: list[tuple[int, int]] = []
    position, size = start, len(text)
    while position < size:
        token = position
        letters, position = _folded_at(text, position)
        for letter in letters:
            if letter == "/":
                continue
            if letter == "<" and wanted == 0:
                if not more or more[-1][0] != token:
                    more.append((token, position))
                continue
            if letter != TAG_LETTERS[wanted]:
                return -1, []
            wanted += 1
            if wanted == len(TAG_LETTERS):
                return position, more
    return -1, []


def _folded_at(text: str, position: int) -> tuple[str, int]:
    """The folded letters of the character, entity or escape at ``position``, and where
    the next one starts."""
    char = text[position]
    if char in "&\\" or not char.isascii():
        bracket = _patterns().bracket.match(text, position)
        if bracket is not None:
            return ("<" if bracket.lastgroup == "open" else ">"), bracket.end()
    if char == "&":
        entity = _ENTITY.match(text, position)
        if entity is not None:
            return _fold_text(html.unescape("&" + entity.group(1))), entity.end()
    elif char == "\\":
        escape = _ESCAPE.match(text, position)
        if escape is not None:
            code = int(next(g for g in escape.groups() if g), 16)
            return (_fold(chr(code)) if code < 0x110000 else ""), escape.end()
    return _fold(char), position + 1


def _fold_text(text: str) -> str:
    return "".join(_fold(c) for c in text)


@lru_cache(maxsize=8192)
def _fold(char: str) -> str:
    """What ``char`` reads as: lower-case ASCII letters or digits, a bracket or slash, or
    nothing (spaces, punctuation, symbols, marks, invisible characters)."""
    if char.isascii():
        if char.isalnum():
            return char.lower()
        return char if char in "<>/" else ""
    look_alike = _look_alikes().get(char)
    if look_alike is not None:
        return look_alike
    decomposed = unicodedata.normalize("NFKD", char)
    if decomposed != char:
        return _fold_text(decomposed)
    if unicodedata.category(char)[0] in "CMZPS":
        return ""
    return char.lower()


# -- the data the matching needs, built on first use --------------------------------------


@lru_cache(maxsize=1)
def _look_alikes() -> dict[str, str]:
    """Single characters Unicode lists as confusable with the tag's letters or the
    brackets, mapped to the ASCII character they look like."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[str, str] = {}
    for ascii_char in {*TAG_LETTERS, *TAG_LETTERS.upper(), "<", ">", "/"}:
        for entry in confusables_data.get(ascii_char, ()):
            look_alike = entry.get("c", "")
            if len(look_alike) == 1 and not look_alike.isascii():
                table[look_alike] = ascii_char.lower()
    return table


class _Patterns:
    """The regular expressions of the matching. Openers are searched for one kind of
    bracket at a time: an expression that starts with one literal character is scanned for
    at the speed of a string search, where an alternation would be tried at every position."""

    def __init__(self) -> None:
        table = _look_alikes()
        self.look_alike_opens = _COMPAT_OPEN + "".join(c for c, a in table.items() if a == "<")
        closes = _COMPAT_CLOSE + "".join(c for c, a in table.items() if a == ">")
        # After the bracket, what could begin the name: a u then an n (either possibly an
        # entity, an escape or a character outside ASCII), skipping ASCII punctuation and
        # more brackets.
        letter = r"[&\\\x80-\U0010ffff]"
        name = rf"(?=[{_ASCII_SKIPPED}<]*(?:[uU]{_ASCII_GAP}(?:[nN]|{letter})|{letter}))"
        lt_entity = r"&(?:amp;)*(?:[lL][tT]|#0*60(?![0-9])|#[xX]0*3[cC](?![0-9a-fA-F]));?"
        lt_escape = r"\\(?:u003[cC]|x3[cC])"
        self.by_char = [
            ("<", re.compile("<" + name)),
            ("&", re.compile(lt_entity + name)),
            ("\\", re.compile(lt_escape + name)),
        ]
        # The name in plain ASCII, the common case, read at the regular expression's speed.
        self.ascii_name = re.compile(_ASCII_GAP + _ASCII_GAP.join(f"[{c}{c.upper()}]" for c in TAG_LETTERS))
        self.look_alike = re.compile(f"[{re.escape(self.look_alike_opens)}]" + name)
        open_bracket = rf"<|{lt_entity}|{lt_escape}|[{re.escape(self.look_alike_opens)}]"
        gt_entity = r"&(?:amp;)*(?:[gG][tT]|#0*62(?![0-9])|#[xX]0*3[eE](?![0-9a-fA-F]));?"
        close_bracket = rf">|{gt_entity}|\\(?:u003[eE]|x3[eE])|[{re.escape(closes)}]"
        self.bracket = re.compile(rf"(?P<close>{close_bracket})|(?P<open>{open_bracket})")

    def openers(self, text: str) -> list[tuple[int, int]]:
        """Where the opening brackets worth a closer look are, in order."""
        found = [m.span() for char, pattern in self.by_char if char in text for m in pattern.finditer(text)]
        if not text.isascii() and any(c in text for c in self.look_alike_opens):
            found += [m.span() for m in self.look_alike.finditer(text)]
        return sorted(found)


@lru_cache(maxsize=1)
def _patterns() -> _Patterns:
    return _Patterns()
