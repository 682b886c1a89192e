"""Finding secret values, and their common encodings, in text on its way out.

A :class:`Redactor` knows a set of ``(name, value)`` pairs and replaces each value with
``[secret NAME]`` wherever it appears as:

- the raw value, also with whitespace or newlines between its characters (letter-spaced
  output, a value split across prints) and reversed;
- its base64 at the three byte alignments, standard and URL-safe (so it is found inside
  ``base64("user:" + value)`` too);
- its hex, lower or upper case; its URL encoding; its JSON and Python-repr escapes.

Cost: one pass to normalise the text (whitespace dropped, case folded, ``+/`` as ``-_``)
and one pass of an Aho-Corasick automaton holding every variant of every secret over it
(``ahocorasick_rs``: about a millisecond a megabyte, however many variants); only a
secret found there is matched with the exact regular expression. A 1 MB text with 10
secrets takes about 3 ms, and about 2 ms more for the credential formats
(:mod:`agent_kernel.credentials`), more when the text is dense with long tokens
(``benchmarks/redaction.py``).

:func:`scrub` applies this to every string of a JSON-like value, and also makes the value
safe to encode: lone surrogates become U+FFFD and nesting deeper than :data:`MAX_DEPTH`
is replaced by a marker, so neither the SDK nor DuckDB can fail on it.
:func:`redacted_json` gives the JSON text of such a value without walking it when it
can: it redacts the JSON text itself, looking through its escapes (see
:meth:`Redactor.json_text`), and walks only a value whose strings hold a secret.

What this cannot do: a value transformed in a way not listed (rot13, character codes,
a slice printed alone, encryption) is not recognised. Code that can read a secret can
always encode it past any filter; redaction is a safety net, not a wall.
"""

from __future__ import annotations

import base64
import gc
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import ahocorasick_rs

if TYPE_CHECKING:
    from agent_kernel.credentials import CredentialFormats

# Shorter values would redact ordinary words and numbers.
MIN_REDACTED_LENGTH = 4
# Encoded and spaced forms of shorter values match too much ordinary text.
MIN_ENCODED_LENGTH = 8
MAX_DEPTH = 64
DEEP_MARKER = f"[nested deeper than {MAX_DEPTH} levels]"

_ASCII_WHITESPACE = bytes(range(0x09, 0x0E)) + bytes(range(0x1C, 0x21))
# ASCII whitespace dropped, letters lower-cased, URL-safe base64 letters for '+' and '/'.
_FOLD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ+/", b"abcdefghijklmnopqrstuvwxyz-_")
_NON_ASCII_SPACE = re.compile(r"[^\S\x00-\x7f]+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SEPARATOR = "\x00"


def fold(text: str) -> bytes:
    """The normalised form both the text and each variant are compared in.

    It drops every character the exact patterns allow between a form's characters
    (``\\s``: ASCII and non-ASCII whitespace) and folds what they match in either case,
    character by character, so a text the pattern of a form matches folds to a text
    holding the fold of that form.
    """
    if not text.isascii():
        text = _NON_ASCII_SPACE.sub("", text)
    return text.encode("utf-8", "surrogatepass").translate(_FOLD, _ASCII_WHITESPACE)


def variants(value: str) -> list[str]:
    """The forms of ``value`` that are redacted (the raw value first)."""
    forms = [value]
    if len(value) >= MIN_ENCODED_LENGTH:
        data = value.encode("utf-8", "surrogatepass")
        forms.append(value[::-1])
        for shift in range(3):
            aligned = data[shift:]
            aligned = aligned[: len(aligned) // 3 * 3]
            if len(aligned) >= 6:
                forms.append(base64.b64encode(aligned).decode())
                forms.append(base64.urlsafe_b64encode(aligned).decode())
        forms += [data.hex(), data.hex().upper()]
    forms += [
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
    ]
    unique: list[str] = []
    for form in forms:
        if form and form not in unique:
            unique.append(form)
    return unique


class Redactor:
    """Replaces the values of ``secrets`` (``(name, value)`` pairs) in text.

    ``formats`` (a :class:`~agent_kernel.credentials.CredentialFormats`), when given, also
    replaces text in a known credential's format, after the named secrets.
    """

    def __init__(self, secrets: Iterable[tuple[str, str]] = (), formats: CredentialFormats | None = None) -> None:
        self.formats = formats if formats else None
        kept = {v: n for n, v in secrets if isinstance(v, str) and len(v) >= MIN_REDACTED_LENGTH}
        # Longest first, so a value containing another is replaced whole.
        self.secrets = sorted(((n, v) for v, n in kept.items()), key=lambda p: -len(p[1]))
        self._needles: list[tuple[bytes, str, tuple[str, ...], bool]] = []
        for name, value in self.secrets:
            by_fold: dict[bytes, list[str]] = {}
            for form in variants(value):
                by_fold.setdefault(fold(form), []).append(form)
            spaced = len(value) >= MIN_ENCODED_LENGTH
            for needle, forms in by_fold.items():
                if needle:
                    self._needles.append((needle, name, tuple(forms), spaced))
        # Every needle looked for in one pass (a bytes.find each costs a pass each).
        self._automaton = ahocorasick_rs.BytesAhoCorasick([n[0] for n in self._needles])

    def __bool__(self) -> bool:
        return bool(self.secrets) or self.formats is not None

    def text(self, text: str) -> str:
        """``text`` with every secret (in every known form) replaced by ``[secret NAME]``."""
        if not text:
            return text
        if self.secrets:
            found = self._candidates(text)
            text = _replace(text, found) if found else text
        return self.formats.redact(text) if self.formats is not None else text

    def texts(self, texts: list[str]) -> list[str]:
        """:meth:`text` of each, checked together in one pass (the common case: no secret)."""
        if not self or not texts:
            return texts
        joined = _SEPARATOR.join(texts)
        if self.secrets:
            found = self._candidates(joined)
            if found:
                texts = [_replace(t, found) for t in texts]
                joined = _SEPARATOR.join(texts)
        if self.formats is not None and self.formats.redact(joined) is not joined:
            texts = [self.formats.redact(t) for t in texts]
        return texts

    def json_text(self, text: str) -> str | None:
        """``text``, JSON as ``json.dumps(value, ensure_ascii=False)`` writes it (lone
        surrogates cleaned), redacted as :func:`scrub` redacts the strings of ``value``;
        ``None`` when those strings must be redacted one by one (:func:`scrub`).

        Without a backslash the JSON text holds every string verbatim and is redacted
        whole, in one pass. With escapes (quotes, backslashes, newlines in strings), a
        secret may be hidden by them (letter-spaced with newlines, a reversed value with
        a quote): the text is looked at with its escapes undone, where every string is
        verbatim between quotes, and given back as it is when nothing is found there
        (the common case); found, it is ``None``.
        """
        if "\\" not in text:
            return self.text(text)
        try:
            view = unescaped(text)
        except UnicodeDecodeError:  # not JSON text: a backslash that starts no escape
            return None
        if self.secrets and self._candidates(view):
            return None
        if self.formats is not None and self.formats.redact(view) is not view:
            return None
        return text

    def _candidates(self, text: str) -> list[tuple[str, tuple[str, ...], bool]]:
        """The forms that may be in ``text`` (a superset: the exact patterns decide)."""
        matches = self._automaton.find_matches_as_indexes(fold(text), overlapping=True)
        if not matches:
            return []
        found = sorted({index for index, _, _ in matches})
        return [self._needles[index][1:] for index in found]  # longest secret first, as listed


def unescaped(json_text: str) -> str:
    """``json_text`` (from ``json.dumps(..., ensure_ascii=False)``) with its string escapes
    undone: its strings verbatim between their quotes.

    JSON's escapes there (``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\uXXXX`` for control
    characters...) are Python's, which the ``unicode_escape`` codec undoes in C; that
    codec reads other bytes as Latin-1, so non-ASCII text goes there and back as UTF-8.
    """
    if json_text.isascii():
        return json_text.encode("ascii").decode("unicode_escape")
    data = json_text.encode("utf-8", "surrogatepass").decode("unicode_escape").encode("latin-1")
    return data.decode("utf-8", "surrogatepass")


def _replace(text: str, found: list[tuple[str, tuple[str, ...], bool]]) -> str:
    for name, forms, spaced in found:
        for form in forms:
            text = _pattern(form, spaced).sub(f"[secret {name}]", text)
    return text


@lru_cache(maxsize=512)
def _pattern(form: str, spaced: bool) -> re.Pattern[str]:
    """``form`` with whitespace allowed between its characters, and hex letters in either case.

    Each form is its own pattern starting with one known character (or a two-letter
    class), so the regex engine scans for that character instead of trying every form
    at every position.
    """
    hex_form = bool(re.fullmatch(r"[0-9A-Fa-f]+", form))
    # Letters that may come in either case: all of a hex form, the digits of a %XX escape.
    either = {i for i, c in enumerate(form) if hex_form and c.isalpha()}
    for match in re.finditer(r"%[0-9A-Fa-f]{2}", form):
        either |= {match.start() + 1, match.start() + 2}
    chars = [f"[{c.lower()}{c.upper()}]" if i in either and c.isalpha() else re.escape(c) for i, c in enumerate(form)]
    return re.compile((r"\s*" if spaced else "").join(chars))


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which no UTF-8 encoder accepts) as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def redacted_json(value: Any, redactor: Redactor | None = None, *, default: Callable[[Any], Any] | None = None) -> str:
    """The JSON text of ``value`` (non-ASCII kept) with its secrets redacted: what
    ``json.dumps(scrub(value, redactor, default=default), ensure_ascii=False)`` gives,
    without walking ``value`` when its JSON text can be redacted whole
    (:meth:`Redactor.json_text`).

    The walk stays for a value whose strings hold a secret, and for one ``json.dumps``
    cannot encode (a cycle, a key it refuses, a ``default`` that fails).
    """
    try:
        text = json.dumps(value, default=default, ensure_ascii=False)
    except Exception:  # noqa: BLE001 - the walk copes with what json.dumps cannot encode
        text = None
    if text is not None:
        text = clean_text(text)
        redacted = redactor.json_text(text) if redactor else text
        if redacted is not None:
            return redacted
    return json.dumps(scrub(value, redactor, default=default), ensure_ascii=False)


def scrub(value: Any, redactor: Redactor | None = None, *, default: Callable[[Any], Any] | None = None) -> Any:
    """A JSON-ready copy of ``value``: encodable, depth-bounded, secrets redacted.

    Strings (dict keys too) are cleaned and redacted; lists and tuples become lists;
    numbers, booleans and ``None`` stay. Anything else goes through ``default`` (a
    function returning something JSON-ready, as for ``json.dumps``), else ``str``.
    The redaction sees each raw string before any JSON escaping or truncation.
    """
    strings: list[str] = []
    with _collection_paused():
        shaped = _shape(value, 0, strings, default)
    if not strings:  # nothing to clean; a dict still comes back as a dict ({} as {})
        return _fill(shaped, iter(())) if isinstance(shaped, list) else shaped
    cleaned = _cleaned(strings)
    redacted = redactor.texts(cleaned) if redactor else cleaned
    with _collection_paused():
        return _fill(shaped, iter(redacted))


@contextmanager
def _collection_paused() -> Iterator[None]:
    """The cyclic garbage collector paused: a walk makes a container per dict and list and
    a tuple per dict item, none of them in a cycle, and the collections they set off
    (each also looking at the rest of the kernel's objects now and then) cost twice the
    walk itself. Left as it was when it was off already."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _cleaned(texts: list[str]) -> list[str]:
    """:func:`clean_text` of each (checked together first: they are nearly always clean)."""
    try:
        _SEPARATOR.join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return [clean_text(t) for t in texts]
    return texts


class _Text:
    """Where :func:`_shape` took a string out (they are put back in the same order)."""

    __slots__ = ()


class _Pairs(list[tuple[Any, Any]]):
    """A dict shaped by :func:`_shape`: its ``(key, value)`` pairs, string keys taken out."""


_TEXT = _Text()


_SCALARS = (bool, int, float)
_LEAVES = frozenset((bool, int, float, type(None)))  # exact types: kept as they are


def _shape(value: Any, depth: int, strings: list[str], default: Callable[[Any], Any] | None) -> Any:
    """``value`` with its strings taken out into ``strings`` (a string left as :data:`_TEXT`).

    The strings and numbers in a dict or list, nearly all of a large value, are taken
    where they are met rather than in a call each: the walk costs a call per container.
    """
    if isinstance(value, str):
        strings.append(value)
        return _TEXT
    if value is None or isinstance(value, _SCALARS):
        return value
    if depth >= MAX_DEPTH:
        strings.append(DEEP_MARKER)
        return _TEXT
    if isinstance(value, dict):
        pairs = _Pairs()
        for key, item in value.items():
            if isinstance(key, str):
                strings.append(key)
                key = _TEXT
            elif not (key is None or isinstance(key, _SCALARS)):
                strings.append(str(key))
                key = _TEXT
            kind = type(item)
            if kind is str:
                strings.append(item)
                pairs.append((key, _TEXT))
            elif kind in _LEAVES:
                pairs.append((key, item))
            else:  # containers, subclasses, other objects
                pairs.append((key, _shape(item, depth + 1, strings, default)))
        return pairs
    if isinstance(value, (list, tuple)):
        shaped: list[Any] = []
        for item in value:
            kind = type(item)
            if kind is str:
                strings.append(item)
                shaped.append(_TEXT)
            elif kind in _LEAVES:
                shaped.append(item)
            else:
                shaped.append(_shape(item, depth + 1, strings, default))
        return shaped
    try:
        converted = default(value) if default is not None else str(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the caller
        converted = f"<unavailable: {type(exc).__name__}>"
    if converted is value:  # a default that cannot convert it
        converted = repr(type(value))
    return _shape(converted, depth + 1, strings, default)


def _fill(shaped: Any, texts: Iterator[str]) -> Any:
    """``shaped`` with the strings of ``texts`` put back where :func:`_shape` took them."""
    if shaped is _TEXT:
        return next(texts)
    if isinstance(shaped, _Pairs):
        out: dict[Any, Any] = {}
        for key, item in shaped:
            real = next(texts) if key is _TEXT else key  # a key's text comes before its value's
            out[real] = next(texts) if item is _TEXT else _fill(item, texts) if isinstance(item, list) else item
        return out
    if isinstance(shaped, list):
        return [next(texts) if i is _TEXT else _fill(i, texts) if isinstance(i, list) else i for i in shaped]
    return shaped
