"""Finding secrets and their encodings in text; making values encodable and bounded."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse

import pytest

from agent_kernel.redaction import DEEP_MARKER, MAX_DEPTH, Redactor, clean_text, scrub, variants

SECRET = 'pa"ss\\word-7Qz!&x/+k'
DATA = SECRET.encode()
MARK = "[secret TOKEN]"


@pytest.mark.parametrize(
    "shown",
    [
        SECRET,
        json.dumps({"k": SECRET}),
        json.dumps(SECRET, ensure_ascii=True),
        repr({"k": SECRET}),
        repr(SECRET.encode()),
        base64.b64encode(DATA).decode(),
        base64.b64encode(b"u" + DATA).decode(),
        base64.b64encode(b"us" + DATA + b"tail").decode(),
        base64.b64encode(b"user:" + DATA).decode(),
        base64.urlsafe_b64encode(DATA).decode(),
        base64.urlsafe_b64encode(b"u" + DATA).decode(),
        base64.urlsafe_b64encode(b"us" + DATA).decode(),
        DATA.hex(),
        DATA.hex().upper(),
        urllib.parse.quote(SECRET, safe=""),
        re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(SECRET, safe="")),
        urllib.parse.quote_plus(SECRET),
        SECRET[::-1],
        " ".join(SECRET),
        "\n".join(SECRET),
        SECRET[:9] + "\n" + SECRET[9:],
        "\u00a0".join(SECRET),  # a non-ASCII space between letters
    ],
    ids=lambda s: s[:24],
)
def test_every_listed_form_is_redacted(shown):
    out = Redactor([("TOKEN", SECRET)]).text(f"before {shown} after")
    assert MARK in out
    for piece in (SECRET[i : i + 10] for i in range(len(SECRET) - 9)):
        assert piece not in out


def test_longest_value_first_and_short_values_left_alone():
    redactor = Redactor([("SHORT", "tok-123456"), ("LONG", "tok-123456-extra"), ("PIN", "42")])
    text = "a tok-123456-extra b tok-123456 c 42"
    assert redactor.text(text) == "a [secret LONG] b [secret SHORT] c 42"


def test_text_without_secrets_is_returned_as_is():
    redactor = Redactor([("TOKEN", SECRET)])
    text = "nothing here " * 1000
    assert redactor.text(text) is text
    assert Redactor().text(SECRET) == SECRET


def test_variants_hold_the_raw_value_and_its_encodings():
    forms = variants(SECRET)
    assert forms[0] == SECRET and SECRET[::-1] in forms and DATA.hex() in forms
    assert variants("abcd") == ["abcd"]  # too short for encodings


def test_scrub_redacts_raw_strings_before_json_escaping():
    value = {"out": "x" + "\n".join(SECRET), SECRET: [1, {"deep": SECRET}], 3: None}
    cleaned = scrub(value, Redactor([("TOKEN", SECRET)]))
    assert cleaned == {"out": "x" + MARK, MARK: [1, {"deep": MARK}], 3: None}


def test_scrub_makes_text_encodable_and_bounds_depth():
    deep: list = []
    inner = deep
    for _ in range(500):
        inner.append([])
        inner = inner[0]
    cleaned = scrub({"text\ud800": ["a\udfffb", ("t", 1.5)], "deep": deep, "obj": object()})
    text = json.dumps(cleaned, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate left
    assert cleaned["text\ufffd"] == ["a\ufffdb", ["t", 1.5]]
    assert DEEP_MARKER in text and text.count("[") < MAX_DEPTH + 10
    assert cleaned["obj"].startswith("<object object")
    assert clean_text("fine") == "fine"


def test_scrub_uses_the_default_for_other_objects():
    class Frame:
        def _repr_llm_(self) -> str:
            return f"Frame with {SECRET}"

    cleaned = scrub([Frame()], Redactor([("TOKEN", SECRET)]), default=lambda v: v._repr_llm_())
    assert cleaned == [f"Frame with {MARK}"]


def test_credential_formats_are_redacted_after_named_secrets_in_texts_and_scrub():
    from agent_kernel.credentials import credential_formats

    github = "ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue"
    redactor = Redactor([("TOKEN", SECRET)], formats=credential_formats())
    assert redactor.text(f"{SECRET} and {github}") == f"{MARK} and [secret GitHub Token]"
    plain = ["nothing", "here " * 100]
    assert redactor.texts(plain) is plain  # nothing found: the same list
    cleaned = scrub({"rows": [["ok", f"token={github}"]], github: 1}, redactor)
    assert cleaned == {"rows": [["ok", "token=[secret GitHub Token]"]], "[secret GitHub Token]": 1}
    assert Redactor(formats=credential_formats())  # on with no named secret
