"""Secret redaction before storage: rates on the corpus, opaque provider data untouched, JSON kept
valid, configuration, and the path through the service into the database."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_memory.config import Settings
from mcp_memory.core.sanitize import Cleaner
from mcp_memory.errors import ConfigError
from mcp_memory.security.redact import Redactor, from_config
from mcp_memory.wiring import build, build_cleaner

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import redaction_report  # noqa: E402 - found through the path set just above

CORPUS = json.loads((ROOT / "tests" / "redaction_corpus.json").read_text(encoding="utf-8"))
AWS = "AKIA" + "Q3EGRTX7PLK2MZ4B"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_corpus_size_and_rates() -> None:
    assert len(CORPUS["secrets"]) >= 150 and len(CORPUS["benign"]) >= 150
    report = redaction_report.measure(CORPUS)
    assert report.catch_rate >= 0.98, report.missed
    assert report.false_positive_rate <= 0.01, report.touched


CORPUS_2 = json.loads((ROOT / "tests" / "redaction_corpus_2.json").read_text(encoding="utf-8"))


def test_second_corpus_rates() -> None:
    """A generated corpus (scripts/make_redaction_corpus.py): more kinds and settings, look-alikes
    that name credentials without holding one. Measured: 370 of 372 caught before the last value
    rule, 371 after; 0 of 317 look-alikes changed (the rules before this corpus: 281, 75.5 %).
    Secrets wrapped in base64 (48 more, 4 kinds) and 109 base64 look-alikes: 0 of the 48 caught
    before base64 runs were read, 48 after; 0 look-alikes changed."""
    assert len(CORPUS_2["secrets"]) >= 420 and len(CORPUS_2["benign"]) >= 420
    assert len({item["kind"] for item in CORPUS_2["secrets"]}) >= 30
    report = redaction_report.measure(CORPUS_2)
    print(f"corpus 2: {report.caught}/{report.secrets} caught, {report.false_positives}/{report.benign} changed")
    assert report.catch_rate >= 0.98, report.missed
    assert report.false_positive_rate <= 0.01, report.touched


CORPUS_3 = json.loads((ROOT / "tests" / "redaction_corpus_3.json").read_text(encoding="utf-8"))


def test_third_corpus_every_secret_caught_and_every_look_alike_kept() -> None:
    """The kinds an unseen corpus found missing (issue 43): letters-only passphrases after a secret
    key, passwords of docker login, htpasswd -b, redis-cli -a and kubeadm join, Docker PATs, age
    secret keys; look-alikes: signatures such as `fn verify_token(token: &str)`, class names, the
    same commands without a secret. Measured before these rules: 4 of 27 caught, 2 of 28 changed."""
    assert len(CORPUS_3["secrets"]) >= 25 and len(CORPUS_3["benign"]) >= 25
    report = redaction_report.measure(CORPUS_3)
    print(f"corpus 3: {report.caught}/{report.secrets} caught, {report.false_positives}/{report.benign} changed")
    assert report.caught == report.secrets, report.missed
    assert report.false_positives == 0, report.touched


@pytest.mark.parametrize(("text", "secret"), [
    ("password=S3cretPass99", "S3cretPass99"), ("PGPASSWORD=Passw0rd2024 psql", "Passw0rd2024"),
    ("DB_PASSWORD=Secret2024", "Secret2024"), ("secret: MySecret99", "MySecret99"),
    ("machine h login u password S3cretPass99", "S3cretPass99"), ("sshpass -p Hunter2pass ssh h", "Hunter2pass"),
    ("sqlplus scott/Tiger2024@orcl", "Tiger2024"),
    ("https://a.blob.core.windows.net/c?sv=2022-11-02&sig=AbCdEf1234567890abcdefGH%3D", "AbCdEf1234567890abcdefGH%3D"),
    ("https://discord.com/api/webhooks/123456789012345678/" + "Ab1_" * 17, "Ab1_" * 17),
    ('{"auths": {"r.example.com": {"auth": "dXNlcjpTM2NyZXRQYXNzOTk="}}}', "dXNlcjpTM2NyZXRQYXNzOTk="),
    ("Cookie: sessionid=8f3a9c2b7e1d4f6a9b0c3d5e7f1a2b4c", "8f3a9c2b7e1d4f6a9b0c3d5e7f1a2b4c"),
    ("cat ~/.pgpass\ndb:5432:app:appuser:S3cretPass99", "S3cretPass99"),
    # a key word after a line break, the first thing in the text or after a blank line
    ("\npassword=Hunter2024", "Hunter2024"), ("DEBUG=1\n\nDB_PASSWORD=Hunter2024", "Hunter2024"),
])
def test_once_missed_shapes_are_caught(text: str, secret: str) -> None:
    redacted, count = Redactor().redact(text)
    assert count >= 1 and secret not in redacted, redacted


@pytest.mark.parametrize("text", ["token = token2", "password = password_hash", "api_key=self.api_key",
                                  "sqlplus / as sysdba", "sshpass -p \"$SSH_PASS\" ssh h", "sig=abc",
                                  "the run took 10:20:30:40:50", "Cookie: <your session cookie>"])
def test_once_missed_shapes_keep_their_look_alikes(text: str) -> None:
    assert Redactor().redact(text) == (text, 0)


def test_real_code_and_configuration_files_are_left_alone() -> None:
    """tests/redaction_samples/ holds real files copied from installed packages (SOURCES.md): at
    most 1 % of their lines that name a credential may change."""
    samples = redaction_report.measure_samples(ROOT / "tests" / "redaction_samples")
    assert samples.files >= 20 and samples.lines >= 5000 and samples.keyword_lines >= 1000
    assert samples.keyword_rate <= 0.01, samples.changed
    sources = (ROOT / "tests" / "redaction_samples" / "SOURCES.md").read_text(encoding="utf-8")
    for path in (ROOT / "tests" / "redaction_samples").rglob("*"):
        if path.is_file() and path.name != "SOURCES.md":
            assert f"`{path.parent.name}/{path.name}`" in sources, f"{path.name} has no provenance"


def test_report_script_prints_rates(capsys: pytest.CaptureFixture[str]) -> None:
    assert redaction_report.main([]) == 0
    out = capsys.readouterr().out
    assert "secrets caught:" in out and "false positives:" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"export AWS_ACCESS_KEY_ID={AWS}", "export AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]"),
        ("postgresql://app:s3cr3t-pw@db:5432/x", "postgresql://app:[REDACTED:url_password]@db:5432/x"),
        ("Authorization: Bearer abcdefghijklmnop1234", "Authorization: Bearer [REDACTED:authorization]"),
        ("password='hunter22'", "password='[REDACTED:password]'"),
        ("secret: Zx9-kk2pQ", "secret: [REDACTED:password]"),
    ],
)
def test_replacements_keep_context(text: str, expected: str) -> None:
    assert Redactor().redact(text) == (expected, 1)


TELEGRAM = "5938274610:" + "AAHk3Jd9Lq2Wm8Zx5Vb7Nc1Tr4Yp6Gs0Fe2"
AZURE = "Zm9v" + "YmFyYmF6cXV4" * 7


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ2w4E6r8T",',
         '"SecretAccessKey": "[REDACTED:password]",'),
        ('"SessionToken": "IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJHMEUCIQ' + "Ab+/" * 80 + '",',
         '"SessionToken": "[REDACTED:password]",'),
        ('const dbPassword = "Tr0ub4dor&3";', 'const dbPassword = "[REDACTED:password]";'),
        ("githubToken: x9Kd-22Lmq7", "githubToken: [REDACTED:password]"),
        (f"AccountName=acct;AccountKey={AZURE}==;EndpointSuffix=core.windows.net",
         "AccountName=acct;AccountKey=[REDACTED:password];EndpointSuffix=core.windows.net"),
        ("curl -sf -u admin:Sup3r-S3cret https://api.example.com/x",
         "curl -sf -u admin:[REDACTED:curl_password] https://api.example.com/x"),
        ("mysql -h db -u root -pS3cr3tPw appdb", "mysql -h db -u root -p[REDACTED:mysql_password] appdb"),
        ("mysqldump -uroot -p'Qw3rty!9' shop", "mysqldump -uroot -p'[REDACTED:mysql_password]' shop"),
        ("machine api.example.com\n  login bob\n  password 7hGf-2kLp9",
         "machine api.example.com\n  login bob\n  password [REDACTED:netrc_password]"),
        (f"https://api.telegram.org/bot{TELEGRAM}/sendMessage",
         "https://api.telegram.org/bot[REDACTED:telegram_bot_token]/sendMessage"),
        ('password: "correct horse battery staple"', 'password: "[REDACTED:password]"'),
        ("postgresql://app:p@ss-w0rd@db:5432/x", "postgresql://app:[REDACTED:url_password]@db:5432/x"),
        ("token=45ghiukldjahdnhzdauz9&token_type_hint=refresh_token",
         "token=[REDACTED:password]&token_type_hint=refresh_token"),
        ("host=db port=5432 user=app password=qMYgmbmfyx dbname=prod",
         "host=db port=5432 user=app password=[REDACTED:dsn_password] dbname=prod"),
        ('key = "-----BEGIN PRIVATE KEY-----\\\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw\\\\n-----END PRIVATE KEY-----"',
         'key = "[REDACTED:private_key]"'),
        ("İstanbul: password=Tr0ub4dor&3", "İstanbul: password=[REDACTED:password]"),
    ],
)
def test_new_shapes_are_caught_whole(text: str, expected: str) -> None:
    assert Redactor().redact(text) == (expected, 1)


@pytest.mark.parametrize("text", [
    "max_token=4096", "token = token2", "pass: 6379", "max_tokens: 100000", "password = password2",
    "key_token = tok3n_cache.get(key)", 'curl -u "$USER:$PASS" https://x', "mysql -u root -p appdb",
    "mysql -h db -P 3306 -u app -p", "Every machine needs password rotation", 'password = "Enter your password"',
    "raise ValueError('password must be at least 8 characters')", "AccountKey=<your-account-key>",
    "const dbPassword = process.env.DB_PASSWORD;", "this.accessToken = accessToken;", "at 12:34:56 then 1920:1080",
    "git@github.com:org/repo.git", "https://example.com/?email=a@b.com", "http://host:8080/a@b",
    "conn = psycopg.connect(host=host, password=password, dbname=db)", "host=db user=app password=$PGPASSWORD",
    'key="-----BEGIN PRIVATE KEY-----\\\\nXXXX\\\\nXXXX\\\\n-----END PRIVATE KEY-----"',
    "a PEM file starts with -----BEGIN RSA PRIVATE KEY-----, then base64",
    # an empty value: the next line is not its value
    "PASSWORD=\nAPI_URL=https://example.com/x", "\n\npassword:\n  file: /run/secrets/db_password2",
])
def test_look_alikes_are_untouched(text: str) -> None:
    assert Redactor().redact(text) == (text, 0)


# pieces of secrets, keys and separators: their concatenations make texts where one rule's marker
# (`[REDACTED:password]`, which holds a colon) could look like the start of another rule's match
FRAGMENTS = st.sampled_from([
    "password", "dbPassword", "token", "=", ": ", '"', "'", " ", "\n", "&", "@", ":", "//", "postgresql://", "u",
    "hunter2!", "Tr0ub4dor", "curl -u ", "mysql -p", "machine h login u password ", "-----BEGIN PRIVATE KEY-----",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "-----END PRIVATE KEY-----", "\\n", AWS[:4], AWS[4:], TELEGRAM[:11],
    TELEGRAM[11:], "host=db ", "password=", "[REDACTED:password]", "Bearer ", "x" * 24, GHP[:4], GHP[4:], "İ", "(", ",",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=14).map("".join))
def test_redacting_redacted_text_changes_nothing(text: str) -> None:
    once, _ = Redactor().redact(text)
    assert Redactor().redact(once) == (once, 0)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["cmd", "password", "env"]), st.lists(FRAGMENTS, max_size=10).map("".join),
                       max_size=3))
def test_redacted_json_text_stays_json(value: dict[str, str]) -> None:
    """Tool-call arguments are JSON text: a replacement never cuts an escape or a string in two."""
    text = json.dumps(value)
    redacted, _ = Redactor().redact(text)
    assert set(json.loads(redacted)) == set(value)


def test_a_quoted_value_with_escaped_quotes_is_redacted_whole() -> None:
    text = json.dumps({"password": 'pa"ss word 42', "cmd": "mysql -p", "next": "token="})
    redacted, count = Redactor().redact(text)
    assert count == 1 and json.loads(redacted) == {"password": "[REDACTED:password]", "cmd": "mysql -p",
                                                   "next": "token="}


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="passwordtokenkeysecret:aws-k_ghpglxocurlmysqlmachine=eyjhfnpmi./İ", max_size=60))
def test_one_needle_search_picks_the_rules_that_may_match(text: str) -> None:
    """Redactor._candidates (one search for all needles) = the rules whose own may_match says yes."""
    for redactor in (Redactor(), from_config({"patterns": {"ticket": r"TCK-\d{6}"}})):
        lowered = text.lower()
        assert redactor._candidates(lowered) == [i for i, rule in enumerate(redactor.rules) if rule.may_match(lowered)]


def test_redaction_is_idempotent_on_the_whole_corpus() -> None:
    """Redacting redacted text changes nothing (an append retried after redaction keeps its hash)."""
    redactor = Redactor()
    for item in CORPUS["secrets"] + CORPUS["benign"]:
        once, _ = redactor.redact(item["text"])
        assert redactor.redact(once) == (once, 0), item


def test_a_value_under_a_secret_key_is_judged_as_a_secret() -> None:
    redactor = Redactor()
    assert redactor.redact_field("db_password", "hunter2") == ("[REDACTED:password]", 1)
    assert redactor.redact_field("githubToken", "plain-words") == ("[REDACTED:password]", 1)
    for key, value in (("db_password", "${DB_PASSWORD}"), ("token", "none"), ("title", "hunter2"),
                       ("password", "<password>"), ("max_tokens", "4096"), ("password_file", "./pw.txt")):
        assert redactor.redact_field(key, value) == (value, 0), (key, value)
    assert from_config({"allowlist": ["^hunter2$"]}).redact_field("password", "hunter2") == ("hunter2", 0)


def test_idempotent() -> None:
    redactor = Redactor()
    once, count = redactor.redact(f"{GHP} and postgresql://u:pw123456@h/db")
    assert count == 2
    assert redactor.redact(once) == (once, 0)


def test_tool_call_arguments_stay_valid_json() -> None:
    args = json.dumps({"cmd": f"curl -H 'Authorization: token {GHP}' https://api.github.com",
                       "env": {"PASSWORD": "hunter2-x", "DSN": "postgres://a:b1c2d3@h/d"}})
    cleaned, count = Cleaner(Redactor()).clean(
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "bash", "arguments": args}}]})
    decoded = json.loads(cleaned["tool_calls"][0]["function"]["arguments"])
    assert count == 3
    assert GHP not in json.dumps(decoded) and "hunter2-x" not in json.dumps(decoded)


def test_opaque_provider_data_is_untouched() -> None:
    signature = "EqQBCkYIBxgCKkA" + GHP + "password=abc12345"
    payload = {
        "role": "assistant",
        "content": f"key {AWS}",
        "thinking": {"content": "plain reasoning about password=abc12345", "encrypted": False,
                     "signature": signature},
        "metadata": {"native": {"content": [
            {"type": "thinking", "thinking": "t", "signature": signature},
            {"type": "redacted_thinking", "data": "ZW5j" + AWS},
            {"type": "reasoning", "encrypted_content": "gAAAA" + GHP},
            {"thoughtSignature": "sig" + AWS},
        ]}},
    }
    cleaned, count = Cleaner(Redactor()).clean(payload)
    assert count == 2  # content and the readable thinking
    assert cleaned["thinking"]["signature"] == signature
    assert cleaned["metadata"]["native"] == payload["metadata"]["native"]
    encrypted = {"role": "assistant", "thinking": {"content": "opaque" + GHP, "encrypted": True}}
    assert Cleaner(Redactor()).clean(encrypted) == (encrypted, 0)


def test_nul_still_replaced_without_redactor() -> None:
    assert Cleaner().clean({"content": "a\x00b"}) == ({"content": "a\ufffdb"}, 0)


def test_config_allowlist_extra_patterns_and_disable() -> None:
    redactor = from_config({"allowlist": [AWS], "patterns": {"internal_token": r"itk_[A-Za-z0-9]{32}"}})
    assert redactor is not None
    assert redactor.redact(f"{AWS} itk_{'a' * 32}") == (f"{AWS} [REDACTED:internal_token]", 1)
    assert from_config({"enabled": False}) is None
    for bad in ({"allowlist": "x"}, {"patterns": {"Bad Name": "x"}}, {"patterns": {"ok": "("}}, {"allowlist": ["("]}):
        with pytest.raises(ConfigError):
            from_config(bad)


def test_cleaner_comes_from_settings(settings: Settings) -> None:
    configured = replace(settings, raw={"redaction": {"patterns": {"ticket": r"TCK-\d{6}"}}})
    assert build_cleaner(configured).clean({"content": "TCK-123456"})[0] == {"content": "[REDACTED:ticket]"}


def test_service_redacts_before_insert(settings: Settings, fresh_db: str) -> None:
    svc = build(settings)
    try:
        session = svc.create_session("p1")
        message = {"role": "user", "content": f"my key is {AWS}", "append_id": "a1"}
        result = svc.append_message(session.session_id, message)
        assert result.redacted == 1
        assert svc.append_message(session.session_id, message).duplicate  # same hash after redaction
        many = svc.append_messages(session.session_id, [{"role": "user", "content": f"{GHP} {GHP}"}])
        assert many.redacted == 2
    finally:
        svc.db.close()
    with psycopg.connect(fresh_db) as conn:
        stored = conn.execute("SELECT string_agg(payload::text, ' ') FROM messages").fetchone()[0]
    assert AWS not in stored and GHP not in stored and "[REDACTED:aws_access_key]" in stored


@pytest.mark.parametrize("redactor", [Redactor(), from_config({"patterns": {"internal": "itk_[a-z]{8}"}})])
def test_payload_prefilter_never_skips_a_payload_that_cleaning_changes(redactor: Redactor) -> None:
    """append checks the payload's canonical JSON once (Cleaner.may_change) and walks it only then:
    that check may say yes too often, never no when the walk would change something."""
    from mcp_memory.core.messages import canonical_json

    cleaner = Cleaner(redactor)
    texts = [item["text"] if isinstance(item, dict) else item for item in CORPUS["secrets"] + CORPUS["benign"]]
    texts += ["nul \x00 inside", "itk_abcdefgh", "Bearer " + "x" * 30, AWS, GHP, "plain words only"]
    skipped = 0
    for text in texts:
        for payload in ({"role": "user", "content": text},
                        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
                            "name": "run", "arguments": json.dumps({"cmd": text})}}]},
                        {"role": "user", "content": "see metadata", "metadata": {"nested": [{"value": text}]}},
                        {"role": "user", "content": "x", "metadata": {"dbPassword": text, "api_key": text}}):
            changed = cleaner.clean(payload) != (payload, 0)
            may = cleaner.may_change(canonical_json(payload).decode())
            assert may or not changed, payload
            skipped += not may
    # the built-in rules all have needles, so payloads with nothing to clean are skipped; a config
    # rule has none (it may match anything), so then every payload is walked
    assert (skipped > 0) == (redactor.rules == Redactor().rules)
