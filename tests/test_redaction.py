"""Finding secrets and their encodings in text; making values encodable and bounded."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse

import pytest

from agent_kernel.redaction import (
    DEEP_MARKER,
    MAX_DEPTH,
    Redactor,
    clean_text,
    redacted_json,
    scrub,
    unescaped,
    variants,
)

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


# -- a value as redacted JSON text, without the walk when nothing is found ----------------

REDACTOR = Redactor([("TOKEN", SECRET)])
SHOWN = [
    *variants(SECRET),
    base64.b64encode(b"user:" + DATA).decode(),
    " ".join(SECRET),
    "\n".join(SECRET),
    "\t".join(SECRET[::-1]),
    SECRET[:9] + "\n" + SECRET[9:],
    "\u00a0".join(SECRET),
    "\r\n".join(SECRET) + " caf\u00e9",
]


def _walked(value, redactor=REDACTOR, default=None):
    return json.dumps(scrub(value, redactor, default=default), ensure_ascii=False)


@pytest.mark.parametrize("shown", SHOWN, ids=lambda s: s[:24])
def test_redacted_json_finds_every_form_behind_json_escapes(shown):
    value = {"out": f'line "one"\n{shown}\nend', "rows": [["a\\b", 1.5], [shown, None]], shown: True}
    text = redacted_json(value, REDACTOR)
    assert text == _walked(value) and MARK in text
    assert not any(SECRET[i : i + 10] in text for i in range(len(SECRET) - 9))
    assert shown not in text


def test_redacted_json_without_a_secret_is_the_json_text():
    value = {"lines": 'a\nb\t"c" \\ d \u00e9\u00a0e \x01', "n": [1, 2.5, None, True], 3: ("t", "u")}
    text = redacted_json(value, REDACTOR)
    assert text == json.dumps(value, ensure_ascii=False) == _walked(value)
    assert REDACTOR.json_text(text) is text  # escapes and all, nothing found: no copy, no walk
    assert redacted_json(value) == text  # no redactor: the JSON text as it is


def test_redacted_json_of_what_json_cannot_encode_is_the_walk():
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    cyclic: list = ["a\nb", SECRET]
    cyclic.append(cyclic)
    for value, default in (
        (cyclic, None),
        ({(1, 2): SECRET, "k": "x\ny"}, None),
        ({"obj": Broken(), "s": "\n".join(SECRET)}, repr),
        ({"lone\ud800": "a\udfff\nb"}, None),
    ):
        text = redacted_json(value, REDACTOR, default=default)
        assert text == _walked(value, default=default)
        text.encode("utf-8")
        assert SECRET not in text


def test_credential_formats_behind_json_escapes_are_redacted():
    from agent_kernel.credentials import credential_formats

    redactor = Redactor([("TOKEN", SECRET)], formats=credential_formats())
    aws = 'aws_secret_key = "' + "wJalrXUtnFEMI/K7MDENG+bPxRfiCY9q2Lw8vTz1" + '"'
    github = "ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue"
    value = {"config": f"[default]\n{aws}\n", "log": [f"push\twith {github}\n"], "plain": "a\nb"}
    text = redacted_json(value, redactor)
    assert text == _walked(value, redactor)
    assert "wJalrXUtnFEMI" not in text and github not in text
    assert "[secret AWS Access Key]" in text and "[secret GitHub Token]" in text
    clean = {"config": "[default]\nregion = eu-west-1\n", "paths": ["/data/run-000001/part-0.parquet\n"] * 50}
    assert redactor.json_text(json.dumps(clean, ensure_ascii=False)) == json.dumps(clean, ensure_ascii=False)


def test_unescaped_gives_the_strings_verbatim():
    value = {"q": 'say "hi"\\ \n\t\r\b\f\x00\x1f caf\u00e9 \u2028 \U0001f600', "k\nk": ["x"]}
    view = unescaped(json.dumps(value, ensure_ascii=False))
    assert value["q"] in view and "k\nk" in view


def test_many_secrets_each_found_in_every_form_in_one_pass():
    values = [(f"KEY_{i}", f"key-{i:02d}-Zq81vNw4Lx0pTb6Ke2Yh9") for i in range(40)]
    redactor = Redactor(values)
    assert len(redactor._needles) > 200  # past what a single SIMD-packed search holds
    for name, value in values[::7]:
        for form in (value, value[::-1], value.encode().hex().upper(), " ".join(value)):
            assert redactor.text(f"x {form} y") == f"x [secret {name}] y"
    text = "nothing to see\u00a0here " * 5000
    assert redactor.text(text) is text and redactor._candidates(text) == []


def test_scrub_leaves_the_garbage_collector_as_it_found_it():
    import gc

    value = {"rows": [{"a": SECRET, "b": [1, "x"]}] * 100}
    assert gc.isenabled()
    assert scrub(value, REDACTOR)["rows"][0]["a"] == MARK and gc.isenabled()
    gc.disable()
    try:
        scrub(value, REDACTOR)
        assert not gc.isenabled()
    finally:
        gc.enable()
