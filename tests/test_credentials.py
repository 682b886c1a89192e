"""Credentials nobody declared: names that say so, URL passwords, values in known formats."""

from __future__ import annotations

import re

import pytest

from agent_kernel.credentials import (
    EXTRA_FORMATS,
    LEFT_OUT,
    credential_formats,
    is_credential_name,
    is_credential_value,
    undeclared,
)

CREDENTIAL_NAMES = [
    "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "HF_TOKEN", "SLACK_BOT_TOKEN", "STRIPE_APIKEY",
    "PGPASSWORD", "MYSQL_ROOT_PASSWORD", "SMTP_PASSWD", "DB_PASS", "GPG_PASSPHRASE", "CLIENT_SECRET",
    "JWT_SECRET_KEY", "SECRET_KEY_BASE", "SSH_PRIVATE_KEY", "AZURE_CREDENTIALS", "SENTRY_DSN",
    "MINIO_ACCESS_KEY", "TOKEN", "api_key",
]  # fmt: skip
OTHER_NAMES = [
    "OPENAI_TOKEN_LIMIT", "MAX_TOKENS", "TOKENIZERS_PARALLELISM", "HF_TOKEN_PATH", "AWS_ACCESS_KEY_ID",
    "SECRET_NAME", "VAULT_SECRET_PATH", "PWD", "OLDPWD", "PATH", "HOME", "KEYBOARD", "PASSWORD_FILE",
    "DATABASE_URL", "AWS_REGION",
]  # fmt: skip


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_names_that_say_credential(name):
    assert is_credential_name(name)


@pytest.mark.parametrize("name", OTHER_NAMES)
def test_names_of_settings_and_other_things(name):
    assert not is_credential_name(name)


@pytest.mark.parametrize("value", ["short", "1", "true", "False", "disabled", "123456789", "3.14159265",
                                   "/home/me/.config/gcloud/creds.json", "~/keys/id_rsa", "./secrets.env",
                                   "C:\\keys\\a.pem"])  # fmt: skip
def test_values_that_cannot_be_a_credential(value):
    assert not is_credential_value(value)


def test_undeclared_finds_names_and_url_passwords_and_skips_the_ignored():
    environ = {
        "OPENAI_API_KEY": "sk-proj-abcdefghijklmnop",
        "OPENAI_TOKEN_LIMIT": "100000000",
        "GITHUB_TOKEN": "ghp_short",
        "DATABASE_URL": "postgres://app:s3cr%40t-Passw0rd@db.internal:5432/app",
        "CACHE_URL": "redis://cache.internal:6379/0",
        "HTTPS_PROXY": "http://me:proxy-pass-9x@proxy:3128",
        "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/creds.json",
        "IGNORED_API_KEY": "visible-to-the-model",
    }
    found = undeclared(environ, ignore=["IGNORED_API_KEY"])
    assert ("OPENAI_API_KEY", "sk-proj-abcdefghijklmnop") in found
    assert ("GITHUB_TOKEN", "ghp_short") in found
    # The URL and its password alone, as written and decoded.
    assert {v for n, v in found if n == "DATABASE_URL"} == {
        environ["DATABASE_URL"],
        "s3cr%40t-Passw0rd",
        "s3cr@t-Passw0rd",
    }
    assert {v for n, v in found if n == "HTTPS_PROXY"} == {environ["HTTPS_PROXY"], "proxy-pass-9x"}
    names = {n for n, _ in found}
    assert not names & {"OPENAI_TOKEN_LIMIT", "CACHE_URL", "GOOGLE_APPLICATION_CREDENTIALS", "IGNORED_API_KEY"}


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
KEY_BLOCK = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(["MIIEowIBAAKCAQEAx4Zq" * 3 + "Ab9"] * 6)
    + "\n-----END RSA PRIVATE KEY-----"
)
FORMATTED = {
    "aws key id": ("AKIAZ7Q2W4E6R8T1Y3U5", "AWS Access Key"),
    "aws secret by its keyword": (
        'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
        "AWS Access Key",
    ),
    "github": ("ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue", "GitHub Token"),
    "github fine-grained": ("github_pat_11ABCDEFG0" + "x" * 60, "GitHub Token"),
    "gitlab": ("glpat-" + "Zk3Lq8Wm2Np7Rt5Vx1Yc", "GitLab Token"),
    "slack": ("xoxb-263594206564-2343982384-FAKEfakeFAKEfake1234", "Slack Token"),
    "stripe": ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "Stripe Access Key"),
    "openai": ("sk-" + "A" * 20 + "T3BlbkFJ" + "B" * 20, "OpenAI Token"),
    "openai project": ("sk-proj-" + "Qw9Er8Ty7Ui6Op5As4Df3Gh2", "OpenAI Token"),
    "anthropic": ("sk-ant-api03-" + "Zx9_Cv8-Bn7" * 8, "Anthropic API Key"),
    "google": ("AIzaSyD-x7Q2W4E6R8T1Y3U5I7O9P1A3S5D7f2k", "Google API Key"),
    "hugging face": ("hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345", "Hugging Face Token"),
    "jwt": (JWT, "JSON Web Token"),
    "sendgrid": ("SG." + "a" * 22 + "." + "b" * 43, "SendGrid API Key"),
    "private key": (KEY_BLOCK, "Private Key"),
}


@pytest.mark.parametrize("what", sorted(FORMATTED))
def test_values_in_a_known_format_are_redacted_wherever_they_are(what):
    value, kind = FORMATTED[what]
    out = credential_formats().redact(f"before {value} after\nnext line")
    assert f"[secret {kind}]" in out and out.endswith(" after\nnext line") and out.startswith("before ")
    secret = re.findall(r"[A-Za-z0-9_\-+/=.]{16,}", value)[-1]
    assert secret[-16:] not in out


def test_a_url_password_is_redacted_and_the_rest_of_the_url_kept():
    out = credential_formats().redact("connect postgres://app:Tr0ub4dor-3@db.internal:5432/app now")
    assert out == "connect postgres://app:[secret Basic Auth Credentials]@db.internal:5432/app now"


@pytest.mark.parametrize(
    "text",
    [
        "Revenue rose 12% in the quarter; see https://example.org/reports/2024/q3-figures.html",
        "/usr/lib/python3.11/site-packages/agent_kernel/credentials.py:120: in redact",
        "id 3f2b8c1e-9d4a-4e7b-8c2f-1a2b3c4d5e6f sha256 "
        + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        '{"user": "jane", "tokens_used": 1234, "model": "claude-sonnet", "path": "s3://bucket/data/part-00001.parquet"}',
        "ACCOUNTING_DEPARTMENT_REPORT_FINAL SKIPPED_BY_CONFIGURATION_FLAG",
    ],
)
def test_ordinary_text_is_left_as_it_is(text):
    assert credential_formats().redact(text) is text


def test_every_kept_detect_secrets_pattern_is_used():
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    plugins = get_mapping_from_secret_type_to_class().values()
    kept = [p for p in plugins if issubclass(p, RegexBasedDetector) and p.__name__ not in LEFT_OUT]
    assert len(kept) >= 12
    expected = sum(len(p.denylist) for p in kept) + len(EXTRA_FORMATS)
    assert len(credential_formats()) == expected  # each has an anchor: none runs on every text


def test_a_credential_among_many_long_tokens_is_found():
    github = FORMATTED["github"][0]
    lines = [f"/data/exports/run-{i:06d}/part-{i:016x}.parquet" for i in range(2_000)]
    lines.insert(1_500, f"token {github} here")
    out = credential_formats().redact("\n".join(lines))
    assert "token [secret GitHub Token] here" in out and github not in out
    assert out.count("\n") == 2_000


@pytest.mark.parametrize(
    "text,kind",
    [
        ("id A3TX" + "Q7Z2" * 4 + " end", "AWS Access Key"),  # each of a format's anchors
        ("id ASIA" + "Q7Z2" * 4 + " end", "AWS Access Key"),
        ("hook XOXB-1234567890-1234567890-abcdefghij end", "Slack Token"),  # anchor in any case
        ("a\u00e9 \u212a gh " * 1000 + "ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue", "GitHub Token"),
    ],
)
def test_formats_are_found_by_any_of_their_anchors(text, kind):
    redacted = credential_formats().redact(text)
    assert f"[secret {kind}]" in redacted and "Q7Z2Q7Z2" not in redacted and "1234567890-abc" not in redacted
