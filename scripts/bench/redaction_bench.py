"""Per-message cost of redaction on the append path (core/messages.py `prepare`).

The limit is measured in the same run: `prepare` of the same messages with a cleaner that has no
redactor (validation, canonical JSON, hash). Messages are chunks of real code (the standard
library's urllib.request, smtplib, netrc, http.cookiejar, configparser: credential-heavy modules), chat
prose, and tool calls whose arguments hold that code; rounds are interleaved so that a shared
machine's drift weighs on both alike.

    python scripts/bench/redaction_bench.py [--messages 5000] [--rounds 5]

Then the worst cases: 200 KB texts built to make a rule work hard (many starts of a match that never
completes), each against the time the same redactor takes on 200 KB of the real code above.
"""

from __future__ import annotations

import argparse
import configparser
import http.cookiejar
import json
import netrc
import smtplib
import statistics
import time
import urllib.request
from pathlib import Path

from mcp_memory.core.messages import prepare
from mcp_memory.core.sanitize import Cleaner
from mcp_memory.security.redact import Redactor

MODULES = (urllib.request, smtplib, netrc, http.cookiejar, configparser)
PROSE = ("The flaky order test fails when two workers append at once; the seq allocation is fine, "
         "the assertion compares created_at values that can tie. I will sort by seq instead.")


def messages(n: int) -> list[dict]:
    lines = [line for module in MODULES for line in Path(module.__file__).read_text(encoding="utf-8").splitlines()]
    chunks = ["\n".join(lines[i:i + 12]) for i in range(0, len(lines), 12)]
    out: list[dict] = []
    for i in range(n):
        chunk = chunks[i % len(chunks)]
        kind = i % 3
        if kind == 0:
            out.append({"role": "user", "content": f"{PROSE} ({i})"})
        elif kind == 1:
            out.append({"role": "assistant", "content": f"Here is the code:\n```python\n{chunk}\n```"})
        else:
            args = json.dumps({"path": f"src/mod{i}.py", "content": chunk})
            out.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "write_file", "arguments": args}}]})
    return out


def timed(batch: list[dict], cleaner: Cleaner) -> float:
    start = time.perf_counter()
    for message in batch:
        prepare(message, max_bytes=1 << 24, cleaner=cleaner, field="message")
    return time.perf_counter() - start


HOSTILE = {
    "curl without -u": "curl ", "mysql without -p": "mysql ", "conninfo without password": "host=a ",
    "unclosed quoted value": 'password="x ', "netrc without password": "machine a login b ",
    "PEM header without body": "-----BEGIN PRIVATE KEY----- ", "URL without @": "a://b:", "key words": "token_",
    "Authorization without value": "authorization: ", "Bearer without value": "Bearer ",
}


def worst_cases(size: int = 200_000) -> None:
    redactor = Redactor()
    code = "\n".join(m["content"] for m in messages(3000) if m["content"].startswith("Here"))[:size]
    start = time.perf_counter()
    redactor.redact(code)
    limit = time.perf_counter() - start
    print(f"worst cases, {size // 1000} KB each, against {limit * 1000:.0f} ms for {size // 1000} KB of real code:")
    for name, unit in HOSTILE.items():
        text = unit * (size // len(unit))
        start = time.perf_counter()
        redactor.redact(text)
        elapsed = time.perf_counter() - start
        print(f"  {name:<28} {elapsed * 1000:6.0f} ms  {elapsed / limit:5.1f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    batch = messages(args.messages)
    bare, redacting = Cleaner(), Cleaner(Redactor())
    limit, ours = [], []
    for _ in range(args.rounds):
        limit.append(timed(batch, bare))
        ours.append(timed(batch, redacting))
    per = 1e6 / args.messages
    lim, mine = statistics.median(limit) * per, statistics.median(ours) * per
    redacted = sum(prepare(m, max_bytes=1 << 24, cleaner=redacting, field="message")[0].redacted for m in batch)
    print(f"messages {args.messages}, rounds {args.rounds}, redactions in the batch {redacted}")
    print(f"prepare without redaction: {lim:.1f} µs/message (the limit)")
    print(f"prepare with redaction:    {mine:.1f} µs/message")
    print(f"redaction cost:            {mine - lim:.1f} µs/message, ratio {mine / lim:.2f}×")
    worst_cases()


if __name__ == "__main__":
    main()
