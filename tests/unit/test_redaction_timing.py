"""Redaction costs time linear in the text, whatever the text: every built-in rule is timed on
adversarial 1 MiB texts (its own key words and prefixes repeated with the characters that extend a
partial match), and the whole redactor on the texts that once took seconds to minutes (a private-key
header repeated without its END line: 100 KB took 8 s; `aB_` repeated before a key word took time
exponential in its length).

Each hostile text is measured against a baseline taken in the same run: the whole redactor on 1 MiB
of ordinary text (the real code and configuration files of tests/redaction_samples, dense with
credential words). A hostile text may cost at most FACTOR times that baseline, so the check holds on
a loaded machine as well as an idle one (both slow down together), while anything worse than linear
costs hundreds of times the baseline at 1 MiB. The times and ratios are printed.
"""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_memory.security.patterns import BUILTIN, SECRET_KEY
from mcp_memory.security.redact import Redactor, _secret_key

SIZE = 1024 * 1024
FACTOR = 6.0  # measured: at most 1.5 × the baseline idle, 3.6 × at load 10 (the baseline taken earlier)
# a key with humps is split into more words than its twin: measured 1.5–3 ×; the exponential
# reading it replaced cost 100,000 × at 20 humps
KEY_FACTOR = 20.0
ATTEMPTS = 3  # a ratio above FACTOR is measured again (a busy moment can slow one measurement)
SAMPLES = Path(__file__).resolve().parents[1] / "redaction_samples"
FILLERS = ("", " ", "=", "\n")  # (a wider sweep, 12 fillers over 80 seeds, found the same worst cases)
EXTRA_SEEDS = {
    "private_key": ("-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----\n" + "A" * 30, "-----BEGIN RSA ",
                    "-----BEGIN PRIVATE KEY-----\n" + "A" * 30 + "\n-----END CERT"),
    "aws_secret_key": ("awssecret", "aws_secret_access_key = ", "AWS_SECRET"),
    "url_password": ("a://", "ab://b:", "ab://b:c"),
    "authorization": ("Authorization: ", "authorization: bearer "),
    "curl_password": ("curl ", "curl -u ", "curl -u a:"),
    "mysql_password": ("mysql ", "mysql -p", "mysql -p'"),
    "netrc_password": ("machine ", "machine a login b ", "default login "),
    "dsn_password": ("host=a ", "host=a user=b ", "user=a password="),
    "password": ("password", "password=", "password=\"", "password='a", "secret: ", "aB_", "a_password",
                 "apiKey=", "token=token(", "key=\""),
    "telegram_bot_token": ("bot123456789:A", "123456789:A"),
    "docker_password": ("docker login ", "docker login -u a ", "docker login -p"),
    "redis_password": ("redis-cli ", "redis-cli -a", "redis-cli -h a "),
    "htpasswd_password": ("htpasswd -b ", "htpasswd -b a b ", "htpasswd -x "),
    "kubeadm_token": ("--token ", "--token abcdef.", "--certificate-key "),
    "age_secret_key": ("AGE-SECRET-KEY-1",),
}


def _fill(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _texts(rule_name: str, needles: tuple[str, ...]):
    for seed in (*needles, *EXTRA_SEEDS.get(rule_name, ())):
        for filler in FILLERS:
            yield f"{seed!r} + {filler!r}", _fill(seed + filler)
    for seed in EXTRA_SEEDS.get(rule_name, ()):
        yield f"{seed!r} then a run", seed + "a" * SIZE


def _timed(redactor: Redactor, text: str) -> float:
    started = time.perf_counter()
    redactor.redact(text)
    return time.perf_counter() - started


def _benign() -> str:
    return _fill("".join(path.read_text() for path in sorted(SAMPLES.rglob("*"))
                       if path.is_file() and path.suffix != ".md"))


@functools.cache
def _baseline() -> float:
    """The whole redactor on 1 MiB of ordinary text: the best of three runs, once per test run."""
    redactor, text = Redactor(), _benign()
    return min(_timed(redactor, text) for _ in range(3))


def _assert_linear(label: str, measure: Callable[[], float], *, first: float | None = None) -> None:
    """`measure()` (seconds for a hostile text) stays under FACTOR × the baseline. A ratio above it
    is measured again, each time as the best of three runs taken in turn with three of a fresh
    baseline, before the test fails: one busy moment of the machine does not fail it, while a text
    that is slow every time does."""
    cost, base = (first if first is not None else measure()), _baseline()
    ratios = []
    for _ in range(ATTEMPTS):
        ratios.append(cost / base)
        print(f"{label}: {cost:.3f} s, {ratios[-1]:.2f} × the baseline ({base:.3f} s)")
        if ratios[-1] < FACTOR:
            return
        redactor, text = Redactor(), _benign()
        pairs = [(measure(), _timed(redactor, text)) for _ in range(3)]
        cost, base = min(c for c, _ in pairs), min(b for _, b in pairs)
    pytest.fail(f"{label}: {', '.join(f'{r:.1f}' for r in ratios)} × the cost of 1 MiB of ordinary text "
                f"(at most {FACTOR} allowed)")


@pytest.mark.parametrize("rule", BUILTIN, ids=[rule.name for rule in BUILTIN])
def test_each_rule_is_linear_on_adversarial_1_mib_texts(rule) -> None:
    redactor = Redactor([rule])
    texts = dict(_texts(rule.name, rule.needles))
    worst, label = max((_timed(redactor, text), label) for label, text in texts.items())
    _assert_linear(f"{rule.name}, slowest 1 MiB text {label}", lambda: _timed(redactor, texts[label]), first=worst)


HOSTILE = {
    "private-key headers without END": _fill("-----BEGIN PRIVATE KEY-----\n"),
    "private-key header and body without END": _fill("-----BEGIN PRIVATE KEY-----\n" + "QUJD" * 8 + "\n"),
    "escaped quotes": _fill('\\"'),
    "assignments": _fill("password=S3cret! "),
    "key words in one run": _fill("password_"),
    "camel and snake": _fill("aB_") + "passwordx",
    "quoted values without end": _fill('password="'),
    "calls": _fill("token=token("),
    "secret colons": _fill("secret: -"),
    "netrc chain": _fill("default login "),
    "conninfo chain": _fill("host=a "),
    "url userinfo": _fill("ab://b:"),
    "backslashes": _fill("\\"),
    # base64 (security/wrapped.py): one run of assignments, a run per assignment (each decoded and
    # redacted), runs after JSON escapes (read two ways), text without secrets, base64 of base64, one
    # run of 1 MiB that decodes to plain text
    "base64 of assignments": _b64(_fill("password=S3cret! "))[:SIZE],
    "base64 runs of assignments": _fill(_b64("password=S3cret!1") + " "),
    "base64 runs after escapes": _fill("\\n" + _b64("password=S3cret!1")),
    "base64 runs of text": _fill(_b64("hello world!") + " "),
    "base64 of base64": _b64(_b64(_fill("password=S3cret! ")))[:SIZE],
    "one base64 run of plain text": _fill("QUJD"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_any_1_mib_message_is_redacted_in_bounded_time(name: str) -> None:
    redactor = Redactor()
    _assert_linear(name, lambda: _timed(redactor, HOSTILE[name]))


def _key_cost(key: str, calls: int) -> float:
    """Seconds for `calls` reads of `key` (the best of three), long enough to measure at all."""
    def run() -> float:
        started = time.perf_counter()
        for _ in range(calls):
            SECRET_KEY.fullmatch(key)
            _secret_key(key)
        return time.perf_counter() - started
    return min(run() for _ in range(3))


def test_secret_key_reads_any_key_in_one_pass() -> None:
    """`aB_` × 20 before a key word took 2.8 s (exponential in the camel-case humps); now it, and
    40,000 of them, cost no more than their lower-case twins (no humps) of the same length."""
    for hump, tail, calls in (("aB_" * 20, "passwordx", 2000), ("aB_" * 40_000, "password", 20)):
        ratio = _key_cost(hump + tail, calls) / _key_cost(hump.lower() + tail, calls)
        print(f"{len(hump + tail)}-character key: {ratio:.2f} × its lower-case twin")
        assert ratio < KEY_FACTOR, len(hump + tail)
    assert _secret_key("aB_" * 40_000 + "password") and not _secret_key("aB_" * 20 + "passwordx")
    for key in ("db_password", "DB.PASSWORD", "dbPassword", "SecretAccessKey", "githubToken", "PGPASSWORD",
                "MY_APP_SECRET_KEY", "--password", "api_key"):
        assert _secret_key(key), key
    for key in ("password_hint", "passwordFile", "keyboard", "monkey", "tokenizer", "bypass"):
        assert not _secret_key(key), key
