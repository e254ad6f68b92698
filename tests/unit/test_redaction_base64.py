"""Secrets wrapped in base64 (security/wrapped.py): a run of base64 that decodes to printable text
holding a secret is redacted whole; runs of binary, hashes and text without a secret are kept."""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_memory.core.messages import canonical_json
from mcp_memory.core.sanitize import Cleaner
from mcp_memory.security import wrapped
from mcp_memory.security.redact import Redactor, from_config

GHP = "ghp_" + "a1B2" * 9
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(("text", "expected"), [
    (f"echo {b64('GITHUB_TOKEN=' + GHP)} | base64 -d", "echo [REDACTED:base64-github_token] | base64 -d"),
    (f"data:\n  .env: {b64('DEBUG=1' + chr(10) + 'DB_PASSWORD=Hunter2024!' + chr(10))}\n",
     "data:\n  .env: [REDACTED:base64-password]\n"),
    (f"state={b64url(json.dumps({'user': 'bob', 'client_secret': 'Falcon7101#x'}))}&x=1",
     "state=[REDACTED:base64-password]&x=1"),
    (f"# {b64(b64('aws_secret_access_key = ' + AWS_SECRET))}", "# [REDACTED:base64-aws_secret_key]"),
    (f'{{"a": "x\\n{b64("password=Hunter2024!")}"}}', '{"a": "x\\n[REDACTED:base64-password]"}'),
    (f"tls.key: {b64('-----BEGIN PRIVATE KEY-----' + chr(10) + 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC' * 3)}",
     "tls.key: [REDACTED:base64-private_key]"),
])
def test_a_wrapped_secret_is_redacted_whole(text: str, expected: str) -> None:
    redactor = Redactor()
    assert redactor.redact(text) == (expected, 1)
    assert redactor.redact(expected) == (expected, 0)
    assert redactor.may_match(text)


@pytest.mark.parametrize("text", [
    "echo " + b64("Hello, world! This is a test message.") + " | base64 -d",
    "payload=" + b64("password = getpass.getpass()"), b64url(json.dumps({"user": "bob", "id": 42})),
    "sha256-" + base64.b64encode(bytes(range(32))).decode(), "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode(),
    "very_long_identifier_name_for_tests = SomeVeryLongClassNameHere()",
    "/usr/lib/python3/site-packages/some_module-1.0.dist-info",
    b64("token_count = len(tokens)") + " " + b64("max_tokens: 8192"),
])
def test_base64_without_a_secret_is_kept(text: str) -> None:
    assert Redactor().redact(text) == (text, 0)


def test_runs_are_read_as_base64_only_when_they_decode_to_text() -> None:
    assert [found for _, found in wrapped.decoded_runs("x " + b64("plain text here!") + " y")] == [
        [(2, "plain text here!")]]
    assert list(wrapped.decoded_runs(base64.b64encode(os.urandom(48)).decode().replace("+", "-"))) == []
    assert list(wrapped.decoded_runs("A" * 15)) == []  # too short to hold a secret
    # after a backslash: the run as written, and after the JSON escape it may start with
    readings = next(wrapped.decoded_runs("\\u00e9" + b64("password=Hunter2024!")))[1]
    assert [decoded for _, decoded in readings] == ["password=Hunter2024!"]


def test_the_allowlist_and_extra_rules_apply_inside_base64() -> None:
    allowed = from_config({"allowlist": ["^Hunter2024!$"]})
    text = "x " + b64("password=Hunter2024!")
    assert allowed.redact(text) == (text, 0)
    extra = from_config({"patterns": {"ticket": r"TCK-\d{6}"}})
    assert extra.redact("x " + b64("see TCK-123456 now")) == ("x [REDACTED:base64-ticket]", 1)


def test_decoded_texts_redacted_together_stay_apart() -> None:
    """Every decoded run is redacted in one pass, separated; a rule that would match across the
    separator makes each one be redacted alone, with the same outcome."""
    spanning = from_config({"patterns": {"spans": r"zzsecret\d[\s\S]{0,12}"}})
    text = f"{b64('one zzsecret1 end')} {b64('nothing here at all')} {b64('two zzsecret2')}"
    redacted, count = spanning.redact(text)
    assert count == 2
    assert redacted == f"[REDACTED:base64-spans] {b64('nothing here at all')} [REDACTED:base64-spans]"


def test_a_secret_inside_base64_inside_base64_inside_base64_is_not_read() -> None:
    """Decoding stops after two levels (wrapped.DEPTH): the work stays bounded."""
    line = "GITHUB_TOKEN=" + GHP
    assert Redactor().redact(b64(b64(line)))[1] == 1
    assert Redactor().redact(b64(b64(b64(line)))) == (b64(b64(b64(line))), 0)


WRAPPED = [f"GITHUB_TOKEN={GHP}", f"password=Hunter2024!{chr(10)}x", json.dumps({"apiKey": "Cobalt42!x"})]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="\n\t\\\"é\x01 =", max_size=6), st.sampled_from(WRAPPED), st.booleans())
def test_the_payload_prefilter_sees_wrapped_secrets(before: str, secret: str, url: bool) -> None:
    """Cleaner.may_change reads the payload's JSON, where what precedes a run may be an escape
    (`\\n`, `\\u0001`, `\\\\`): it never says no when cleaning would change the payload."""
    text = before + (b64url(secret) if url else b64(secret))
    cleaner = Cleaner(Redactor())
    for payload in ({"role": "user", "content": text},
                    {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
                        "name": "run", "arguments": json.dumps({"cmd": text})}}]}):
        changed = cleaner.clean(payload) != (payload, 0)
        assert changed
        assert cleaner.may_change(canonical_json(payload).decode())
