"""The extension's TypeScript and the kernel's Python agree on what crosses between them.

The notebook channel's messages are declared twice, as interfaces in
``labextension/src/protocol.ts`` and as TypedDicts in ``agent_kernel/kernel/protocol.py``;
the chat's and the secrets row's limits and choices are mirrored by hand in ``chat.ts`` and
``secrets.ts``. Nothing compiles the two sides together, so these tests read the TypeScript
as text (a small reader for the few forms it uses: no Node needed) and compare it with the
Python objects: a message type, a key, a key's optionality or type, a limit or a choice
changed on one side only fails here.
"""

from __future__ import annotations

import re
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from agent_kernel import config, secrets
from agent_kernel.kernel import channel, protocol
from agent_kernel.magics import agent as agent_magics
from agent_kernel.magics import chat
from tests.support.paths import REPO

SRC = REPO / "labextension" / "src"


# -- a reader for the TypeScript's declarations ----------------------------------------------


def _source(name: str) -> str:
    """A TypeScript file's text without its comments."""
    text = (SRC / name).read_text(encoding="utf-8")
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def ts_interfaces(text: str) -> dict[str, dict[str, tuple[str, bool]]]:
    """``export interface IName { key?: type; ... }`` as {IName: {key: (type, optional)}}."""
    interfaces: dict[str, dict[str, tuple[str, bool]]] = {}
    for name, body in re.findall(r"export interface (\w+) \{([^{}]*)\}", text):
        fields: dict[str, tuple[str, bool]] = {}
        for line in body.split(";"):
            if not line.strip():
                continue
            match = re.fullmatch(r"\s*(\w+)(\??):\s*(.+?)\s*", line, flags=re.S)
            assert match, f"{name}: cannot read the field {line.strip()!r}"
            fields[match[1]] = (" ".join(match[3].split()), match[2] == "?")
        interfaces[name] = fields
    return interfaces


def ts_type_aliases(text: str) -> dict[str, str]:
    """``export type Name = ...;`` as {Name: its type, on one line, without a leading ``|``}."""
    return {
        name: " ".join(value.split()).lstrip("| ")
        for name, value in re.findall(r"export type (\w+) =\s*([^;]+);", text)
    }


def ts_constant(text: str, name: str) -> Any:
    """The value of ``const NAME = ...;``: a number (``64 * 1024``, ``200_000``), a string, a
    list of strings, or an object of those (its keys as written)."""
    match = re.search(rf"\bconst {name}(?:\s*:\s*[^=]+)? =\s*(.+?);\s*$", text, flags=re.M | re.S)
    assert match, f"no const {name}"
    return _ts_value(match[1].strip())


def _ts_value(value: str) -> Any:
    value = value.strip()
    if value.startswith("{"):
        pairs = re.findall(r"""(?:'([^']+)'|(\w+))\s*:\s*('[^']*'|[\d_* ]+)""", value[1:-1])
        return {quoted or bare: _ts_value(item) for quoted, bare, item in pairs}
    if value.startswith("["):
        return re.findall(r"'([^']*)'", value)
    if value.startswith("'"):
        return value[1:-1]
    assert re.fullmatch(r"[\d_*\s]+", value), f"not a number: {value!r}"
    product = 1
    for factor in value.split("*"):
        product *= int(factor.strip())
    return product


# -- the Python types as TypeScript would spell them -------------------------------------------


def as_typescript(annotation: Any) -> str:
    """``annotation`` (a protocol.py field's type) spelled as protocol.ts spells it: unions
    as sorted members, so both sides compare after :func:`normalised`."""
    origin = get_origin(annotation)
    if annotation is str:
        return "string"
    if annotation is int:
        return "number"
    if annotation is bool:
        return "boolean"
    if annotation is type(None):
        return "null"
    if is_typeddict(annotation):
        return "I" + annotation.__name__
    if origin is Literal:
        return " | ".join(sorted(f"'{value}'" for value in get_args(annotation)))
    if origin in (Union, types.UnionType):
        return " | ".join(sorted(as_typescript(member) for member in get_args(annotation)))
    if origin is list:
        return as_typescript(get_args(annotation)[0]) + "[]"
    if origin is dict and get_args(annotation) == (str, Any):
        return "JSONObject"
    raise AssertionError(f"no TypeScript spelling for {annotation!r}")


def normalised(spelling: str, aliases: dict[str, str]) -> str:
    """A TypeScript type with its aliases resolved and a union's members sorted."""
    resolved = aliases.get(spelling, spelling)
    return " | ".join(sorted(member.strip() for member in resolved.split("|")))


def typeddicts() -> dict[str, type]:
    return {name: value for name, value in vars(protocol).items() if is_typeddict(value)}


def union_members(union: Any) -> set[str]:
    return {member.__name__ for member in get_args(union)}


# -- the channel's messages ---------------------------------------------------------------------

PROTOCOL_TS = _source("protocol.ts")
INTERFACES = ts_interfaces(PROTOCOL_TS)
ALIASES = ts_type_aliases(PROTOCOL_TS)


def test_the_reader_reads_protocol_ts():
    """The reader found what protocol.ts declares (a reader that reads nothing agrees with everything)."""
    assert len(INTERFACES) >= 10
    assert INTERFACES["IHelloMessage"]["notebook"] == ("string", False)
    assert INTERFACES["IFocusMessage"]["cell"] == ("string | null", True)
    assert set(ALIASES) >= {"FrontEndMessage", "KernelMessage", "CellType", "EditOp"}


def test_every_message_shape_is_declared_on_both_sides():
    assert set(INTERFACES) == {"I" + name for name in typeddicts()}


@pytest.mark.parametrize("name", sorted(typeddicts()))
def test_a_message_has_the_same_keys_optionality_and_types(name):
    shape = typeddicts()[name]
    hints = get_type_hints(shape)
    fields = INTERFACES["I" + name]
    assert set(fields) == set(hints), f"{name}: keys differ"
    optional = {key for key, (_, is_optional) in fields.items() if is_optional}
    assert optional == set(shape.__optional_keys__), f"{name}: which keys may be left out differs"
    for key, annotation in hints.items():
        if get_origin(annotation) is not None and get_origin(annotation).__name__ == "NotRequired":
            annotation = get_args(annotation)[0]
        python = normalised(as_typescript(annotation), {})
        typescript = normalised(fields[key][0], ALIASES)
        assert typescript == python, f"{name}.{key}: {typescript} in protocol.ts, {python} in protocol.py"


@pytest.mark.parametrize("union", ["FrontEndMessage", "KernelMessage"])
def test_each_direction_has_the_same_messages(union):
    typescript = {member.strip() for member in ALIASES[union].split("|")}
    assert typescript == {"I" + name for name in union_members(getattr(protocol, union))}


def test_every_message_says_its_type():
    """Each message of either direction has a literal ``type``, one per message, the same on both sides."""
    tags: dict[str, str] = {}
    for name in union_members(protocol.FrontEndMessage) | union_members(protocol.KernelMessage):
        (tag,) = get_args(get_type_hints(getattr(protocol, name))["type"])
        assert INTERFACES["I" + name]["type"] == (f"'{tag}'", False)
        assert tag not in tags, f"{name} and {tags[tag]} share the type {tag!r}"
        tags[tag] = name
    assert set(tags) == {
        "hello",
        "focus",
        "cells",
        "edited",
        "kernel",
        "welcome",
        "read",
        "edit",
        "withdraw",
        "refused",
        "moved",
        "turn_ended",
    }


def test_the_channel_constants_agree():
    channel_ts = _source("channel.ts")
    assert ts_constant(PROTOCOL_TS, "PROTOCOL") == protocol.PROTOCOL == channel.PROTOCOL
    assert ts_constant(channel_ts, "TARGET") == channel.TARGET
    assert ts_constant(channel_ts, "MAX_CELLS") == channel.MAX_CELLS
    assert ts_constant(channel_ts, "MAX_SOURCE_CHARS") == channel.MAX_SOURCE_CHARS
    assert ts_constant(channel_ts, "MAX_MESSAGE_CHARS") == channel.MAX_MESSAGE_BYTES
    # The front end leaves sources out past this size: its answer stays under the kernel's limit.
    assert ts_constant(channel_ts, "MAX_ANSWER_CHARS") < channel.MAX_CELLS_BYTES


def test_an_edit_is_made_against_the_same_source_version_on_both_sides():
    """protocol.ts's sourceVersion gave these values in node (UTF-16 code units: an emoji
    counts two, as in the browser); the browser tests apply an unchanged cell's edit, which
    needs the two to agree on every source."""
    assert ts_constant(PROTOCOL_TS, "CELL_CHANGED") == protocol.CELL_CHANGED
    assert protocol.source_version("") == "bdcb81aee8d83:0"
    assert protocol.source_version("kind = 'line'") == "689745d429e13:13"
    assert protocol.source_version("é😀x") == "afabd67a77f3f:4"
    assert protocol.source_version("x" * 1000) == "1a7942aee5273b:1000"


# -- the chat's and the secrets row's mirrored limits and choices ------------------------------


def test_the_chat_limits_are_the_kernels():
    assert ts_constant(_source("chat.ts"), "LIMITS") == {
        "promptChars": chat.MAX_PROMPT_CHARS,
        "textChars": chat.MAX_TEXT_CHARS,
        "imageBytes": chat.MAX_IMAGE_BYTES,
        "attachments": chat.MAX_ATTACHMENTS,
        "nameChars": chat.MAX_NAME_CHARS,
    }


def test_the_chat_offers_the_choices_the_kernel_accepts():
    chat_ts = _source("chat.ts")
    assert ts_constant(chat_ts, "THINKING") == list(agent_magics._THINK_LEVELS)
    assert list(ts_constant(chat_ts, "APPROVE")) == list(config.APPROVE_MODES)
    kinds = ts_type_aliases(chat_ts)["AttachmentKind"]
    assert sorted(kind.strip(" '") for kind in kinds.split("|")) == sorted(chat.ATTACHMENT_KINDS)


def test_the_secret_limits_are_the_kernels():
    limits = ts_constant(_source("secrets.ts"), "SECRET_LIMITS")
    assert limits["hosts"] == secrets.MOST_HOSTS
    # A host as the person writes it may carry a port: parse_host takes HOST_CHARS + 8 characters.
    assert limits["hostChars"] == secrets.HOST_CHARS + 8
    assert limits["nameChars"] == chat.MAX_NAME_CHARS
    assert set(limits) == {"hosts", "hostChars", "nameChars", "rows"}  # rows: how many the row draws
