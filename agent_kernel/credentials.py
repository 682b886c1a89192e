"""Credentials nobody declared: environment variables named like one, text shaped like one.

Two nets beside the declared secrets of :mod:`agent_kernel.secrets`:

- **By name.** An environment variable whose name says it holds a credential
  (``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ``PGPASSWORD``,
  ``GOOGLE_CREDENTIALS``, ``SENTRY_DSN``...) is a secret unless its value plainly is not
  one (shorter than 8 characters, a number, a boolean, a file path) or its name ends in
  a word that names a setting about the credential (``*_TOKEN_LIMIT``, ``*_KEY_PATH``).
  Any variable holding a URL with a password (``DATABASE_URL=postgres://u:pw@h/db``) is
  one too. ``AgentKernel.secret_env_ignore`` opts a name out.
- **By shape.** Text in a well-known credential format (AWS access key ids, GitHub,
  GitLab, Slack, Stripe, OpenAI, PyPI, SendGrid tokens, JWTs, private key blocks,
  passwords in URLs...) is redacted wherever it appears, as ``[secret <kind>]``. The
  formats are the regular expressions of the detect-secrets plugins (Yelp's maintained
  detector), read once from the library, plus a few it lacks (Anthropic, Google,
  Hugging Face keys, GitHub fine-grained tokens). detect-secrets' own scanner is not
  used on this path: it is line-oriented, runs every plugin on every line, and costs
  about a second for a megabyte. Here each pattern runs only when a piece of text it
  requires (its *anchor*, taken from the pattern itself) is in the text (every anchor
  looked for in one Aho-Corasick pass), and only around runs of 20 or more token
  characters (every format has one): a megabyte without such runs costs ~2 ms, one
  dense with long tokens (paths, URLs, ids) ~10 ms.
  Plugins left out, and why, are in :data:`LEFT_OUT`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

__all__ = ["CredentialFormats", "credential_formats", "is_credential_name", "undeclared"]

# Parts of a name that say it holds a credential, anywhere in it.
_ANYWHERE = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|SECRET|API_?KEY|PRIVATE_?KEY|"
    r"(?:^|_)(?:SIGNING|ENCRYPTION|MASTER|ACCOUNT|SERVICE|ACCESS)_KEY(?:$|_)"
)
# ... or as the name's last word (``GITHUB_TOKEN``, ``DB_PASS``, ``SENTRY_DSN``).
_LAST_WORD = {"TOKEN", "PASS", "PWD", "DSN", "AUTH"}
# Last words naming a setting about a credential, not the credential.
_SETTING_WORDS = {
    "LIMIT", "LIMITS", "COUNT", "SIZE", "LENGTH", "LEN", "MAX", "MIN", "FILE", "PATH", "DIR",
    "HOME", "URL", "URI", "ENDPOINT", "HOST", "PORT", "REGION", "NAME", "USER", "USERNAME",
    "ID", "TYPE", "MODE", "ENABLED", "DISABLED", "VERSION", "TTL", "TIMEOUT", "EXPIRY",
    "EXPIRES", "PROVIDER", "METHOD", "HEADER", "FORMAT", "ALGORITHM", "ARN",
}  # fmt: skip
# This package's own settings (AGENT_KERNEL_SECRET_ENV lists names, not values).
_OWN_SETTINGS = "AGENT_KERNEL_"
_NOT_SECRET_VALUES = {"true", "false", "yes", "no", "on", "off", "none", "null", "enabled", "disabled"}
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_PATH = re.compile(r"(?:/|~|\.\.?/|[A-Za-z]:\\)")
MIN_CREDENTIAL_LENGTH = 8


def is_credential_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential."""
    upper = name.upper()
    words = upper.split("_")
    if words[-1] in _SETTING_WORDS or upper in ("PWD", "OLDPWD") or upper.startswith(_OWN_SETTINGS):
        return False
    return bool(_ANYWHERE.search(upper)) or (len(words) > 1 and words[-1] in _LAST_WORD) or upper == "TOKEN"


def is_credential_value(value: str) -> bool:
    """Whether a value could be a credential (not short, a number, a boolean or a path)."""
    value = value.strip()
    if len(value) < MIN_CREDENTIAL_LENGTH or value.lower() in _NOT_SECRET_VALUES:
        return False
    return not (_NUMBER.fullmatch(value) or _PATH.match(value))


def url_password(value: str) -> str | None:
    """The password of a URL with one (``scheme://user:password@host``), else ``None``."""
    if "://" not in value or "@" not in value:
        return None
    try:
        password = urllib.parse.urlsplit(value.strip()).password
    except ValueError:
        return None
    return password or None


def undeclared(environ: Mapping[str, str], ignore: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``(name, value)`` of the credentials in ``environ`` found by name or as URL passwords.

    A URL's password is also given alone (when it is long enough not to match ordinary
    words), so code printing only the password is redacted too.
    """
    skipped = set(ignore)
    found: list[tuple[str, str]] = []
    for name, value in environ.items():
        if name in skipped or not value:
            continue
        password = url_password(value)
        if password is not None:
            found.append((name, value))
            unquoted = urllib.parse.unquote(password)
            found += [(name, p) for p in {password, unquoted} if len(p) >= MIN_CREDENTIAL_LENGTH]
        elif is_credential_name(name) and is_credential_value(value):
            found.append((name, value))
    return found


# -- values in a credential's format -------------------------------------------------------

# detect-secrets plugins not used, by class name, and why.
LEFT_OUT = {
    "IPPublicDetector": "an address is not a credential",
    "KeywordDetector": "source-code assignments (password = ...), not values",
    "HexHighEntropyString": "any hash or id would go",
    "Base64HighEntropyString": "any hash or id would go",
    "IbmCloudIamDetector": "a source-code assignment heuristic; 165 ms a MB",
    "IbmCosHmacDetector": "a source-code assignment heuristic; 115 ms a MB",
    "CloudantDetector": "a source-code assignment heuristic; 75 ms a MB",
    "SoftlayerDetector": "a source-code assignment heuristic; 80 ms a MB",
    "ArtifactoryDetector": "matches ordinary upper-case words; 40 ms a MB",
    "DiscordBotTokenDetector": "no fixed text to look for first: runs on every text",
    "TelegramBotTokenDetector": "no fixed text to look for first: runs on every text",
    "MailchimpDetector": "no fixed text to look for first: runs on every text",
}

# Formats detect-secrets 1.5 does not know: (kind, pattern).
EXTRA_FORMATS = (
    ("Anthropic API Key", r"sk-ant-[a-z]+\d*-[A-Za-z0-9_\-]{20,}"),
    ("OpenAI Token", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}"),
    ("Google API Key", r"AIza[0-9A-Za-z_\-]{35}"),
    ("Hugging Face Token", r"hf_[A-Za-z0-9]{30,}"),
    ("GitHub Token", r"github_pat_[A-Za-z0-9_]{22,}"),
)

# A token's characters: a match without a group is widened over them (a longer token, a
# JWT's signature after its lazily matched payload).
_TOKEN_TAIL = r"(?:[A-Za-z0-9_\-+/=]|\.(?=[A-Za-z0-9_\-]))*"
# A private key is redacted from its header to its end (or the end of the text).
_KEY_BLOCK_TAIL = r"[\s\S]*?(?:-----END[^\n]*?-----|Private-MAC:[^\n]*|\Z)"


@dataclass(frozen=True)
class _Format:
    kind: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]  # one of them is in the text where it matches (lower case if
    folded: bool  # the pattern ignores case, and then looked for in the lower-cased text)


# Characters of a token (a key, a URL with its password) and the shortest credential token:
# text without such a run holds no credential, and most text has none (looked for in one
# pass over bytes). Only around the runs is each format looked for.
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.:@%")
_TOKEN_MAP = bytes(1 if b in _TOKEN_CHARS else 0 for b in range(256))
MIN_TOKEN = 20
_LONG_RUN = b"\x01" * MIN_TOKEN
# Text either side of a run a format may need (a private key's header, "aws_secret = '").
MARGIN = 64
MAX_RUNS = 512


class CredentialFormats:
    """Redacts text in a credential's format as ``[secret <kind>]``."""

    def __init__(self, formats: Iterable[tuple[str, re.Pattern[str]]]) -> None:
        self.formats = []
        for kind, pattern in formats:
            anchors = _anchors(pattern)
            if anchors:
                folded = bool(pattern.flags & re.IGNORECASE)
                anchors = {a.lower() for a in anchors} if folded else anchors
                shared = _shared(anchors)
                anchors = {shared} if len(shared) >= 2 else anchors
                self.formats.append(_Format(kind, pattern, tuple(sorted(anchors)), folded))

        # Every anchor looked for in one pass (a search each costs a pass each): those of
        # the formats that ignore case in the lower-cased text, the others in the text.
        self._exact = _Anchors([f for f in self.formats if not f.folded])
        self._folded = _Anchors([f for f in self.formats if f.folded])

    def __len__(self) -> int:
        return len(self.formats)

    def present(self, text: str) -> list[_Format]:
        """The formats that may match ``text``: one of their anchors is in it."""
        found = self._exact.found(text)
        if self._folded.formats:
            found |= self._folded.found(text.lower())
        return [f for f in self.formats if f in found]

    def redact(self, text: str) -> str:
        """``text`` with every credential in a known format replaced (``text`` itself if none)."""
        # One byte per character (non-ASCII ones as '?'), so positions are the text's.
        tokens = text.encode("ascii", "replace").translate(_TOKEN_MAP)
        if _LONG_RUN not in tokens:
            return text
        windows = _windows(tokens, len(text))
        pieces = [text[start:end] for start, end in windows]
        present = self.present("\n".join(pieces))
        if not present:
            return text
        parts: list[str] = []
        done = 0
        for (start, end), piece in zip(windows, pieces):
            redacted = piece
            for found in present:
                redacted = found.pattern.sub(partial(_replaced, kind=found.kind), redacted)
            if redacted != piece:
                parts += [text[done:start], redacted]
                done = end
        return "".join([*parts, text[done:]]) if parts else text


class _Anchors:
    """The anchors of some formats, looked for together (Aho-Corasick, ``ahocorasick_rs``)."""

    def __init__(self, formats: list[_Format]) -> None:
        import ahocorasick_rs

        self.formats = formats
        self._owners = [f for f in formats for _ in f.anchors]
        anchors = [a.encode("utf-8", "surrogatepass") for f in formats for a in f.anchors]
        self._automaton = ahocorasick_rs.BytesAhoCorasick(anchors)

    def found(self, text: str) -> set[_Format]:
        """The formats one of whose anchors is in ``text`` (looked for in its UTF-8 bytes,
        where the automaton is fastest: a text holds an anchor when its bytes hold the
        anchor's)."""
        if not self.formats:
            return set()
        data = text.encode("utf-8", "surrogatepass")
        matches = self._automaton.find_matches_as_indexes(data, overlapping=True)
        return {self._owners[index] for index in {m[0] for m in matches}}


def _windows(tokens: bytes, size: int) -> list[tuple[int, int]]:
    """The spans around the long token runs, overlapping ones merged (the whole text when
    there are many: looking at it whole is then cheaper than cutting it up)."""
    windows: list[tuple[int, int]] = []
    found = tokens.find(_LONG_RUN)
    for _ in range(MAX_RUNS):
        if found < 0:
            return windows
        run_end = tokens.find(b"\0", found)
        run_end = size if run_end < 0 else run_end
        start, end = max(0, found - MARGIN), min(size, run_end + MARGIN)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
        found = tokens.find(_LONG_RUN, run_end)
    return windows if found < 0 else [(0, size)]


def _replaced(match: re.Match[str], kind: str) -> str:
    """The match with its secret replaced: the group a pattern captures it in (a group
    ending where the match ends, but for a closing quote or ``@``), else all of it."""
    marker = f"[secret {kind}]"
    base, whole = match.start(), match.group(0)
    for group in range(1, (match.re.groups or 0) + 1):
        start, end = match.span(group)
        if start > base and end > start and match.end() - end <= 1:
            return whole[: start - base] + marker + whole[end - base :]
    return marker


@lru_cache(maxsize=1)
def credential_formats() -> CredentialFormats:
    """The formats, read from detect-secrets once per process (importing it takes ~0.1 s)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector

    formats: list[tuple[str, re.Pattern[str]]] = []
    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    for kind, plugin in sorted(plugins.items()):
        if not issubclass(plugin, RegexBasedDetector) or plugin.__name__ in LEFT_OUT:
            continue
        tail = _KEY_BLOCK_TAIL if issubclass(plugin, PrivateKeyDetector) else _TOKEN_TAIL
        for pattern in plugin.denylist:
            widened = pattern if pattern.groups else re.compile(f"(?:{pattern.pattern}){tail}", pattern.flags)
            formats.append((kind, widened))
    formats += [(kind, re.compile(f"(?:{p}){_TOKEN_TAIL}")) for kind, p in EXTRA_FORMATS]
    return CredentialFormats(formats)


def _anchors(pattern: re.Pattern[str]) -> set[str] | None:
    """Texts one of which every match contains (at least 2 characters), else ``None``."""
    try:
        from re import _constants, _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - a pattern this cannot read runs on no text
        return None
    return _required(list(parsed), _constants)


def _shared(texts: set[str]) -> str:
    """The longest text all of ``texts`` contain (one search for it is cheaper than one each)."""
    shortest = min(texts, key=len)
    for size in range(len(shortest), 0, -1):
        for start in range(len(shortest) - size + 1):
            piece = shortest[start : start + size]
            if all(piece in t for t in texts):
                return piece
    return ""


def _required(items: list[Any], c: Any) -> set[str] | None:
    """The best set of alternative texts a sequence of parsed regex items requires.

    Consecutive required pieces are joined (``A`` then ``3T|BIA|KIA`` gives ``A3T``,
    ``ABIA``, ``AKIA``) while the set stays small: longer anchors are rarer in text.
    """
    candidates: list[set[str]] = []
    current: set[str] | None = None
    for op, arg in items:
        piece = _piece(op, arg, c)
        if piece is None:
            if current:
                candidates.append(current)
            current = None
        elif current and len(current) * len(piece) <= 16:
            current = {a + b for a in current for b in piece}
        else:
            if current:
                candidates.append(current)
            current = piece
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) and current is not None:
            candidates.append(current)  # what a repeat requires cannot be joined to what follows
            current = None
    if current:
        candidates.append(current)
    candidates = [s for s in candidates if min(map(len, s)) >= 2]
    if not candidates:
        return None
    return max(candidates, key=lambda s: (min(map(len, s)), -len(s)))


def _piece(op: Any, arg: Any, c: Any) -> set[str] | None:
    """The texts one parsed item requires (one of), else ``None``."""
    if op is c.LITERAL:
        return {chr(arg)}
    if op is c.IN and len(arg) <= 6 and all(o is c.LITERAL for o, _ in arg):
        return {chr(a) for _, a in arg}
    if op is c.SUBPATTERN:
        return _whole(list(arg[-1]), c)
    if op is c.BRANCH:
        alternatives = [_whole(list(a), c) for a in arg[1]]
        if all(alternatives) and sum(map(len, alternatives)) <= 16:  # type: ignore[arg-type]
            return set().union(*alternatives)  # type: ignore[arg-type]
        return None
    if op in (c.MAX_REPEAT, c.MIN_REPEAT) and arg[0] >= 1:
        return _required(list(arg[2]), c)
    return None


def _whole(items: list[Any], c: Any) -> set[str] | None:
    """The texts a sequence matches when it is all literal pieces (a group, a branch), else
    the best texts it requires."""
    joined: set[str] = {""}
    for op, arg in items:
        piece = _piece(op, arg, c)
        if piece is None or op in (c.MAX_REPEAT, c.MIN_REPEAT) or len(joined) * len(piece) > 16:
            return _required(items, c)
        joined = {a + b for a in joined for b in piece}
    return joined if joined != {""} else None
