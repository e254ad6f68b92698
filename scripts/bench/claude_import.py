"""Import throughput of the pure Claude Code read, and the cost of an incremental (hook) read.

Usage: python scripts/bench/claude_import.py [COPIES]  — repeats the real Claude Code 2.1.328 session of
tests/fixtures/real/claude-code COPIES times (47 lines each, fresh ids, one chain) into a temporary file.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from mcp_memory.agents import adapter_for

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "real" / "claude-code"


def transcript(copies: int) -> list[str]:
    template = next(FIXTURE.rglob("7f067304-*.jsonl")).read_text(encoding="utf-8")
    records = [json.loads(line) for line in template.splitlines()]
    ids = {r["uuid"] for r in records if r.get("uuid")} | (
        {(r.get("message") or {}).get("id") for r in records} - {None}
    )
    lines, last = [], None
    for copy in range(copies):
        chunk = template
        for old in ids:
            chunk = chunk.replace(old, str(uuid.uuid5(uuid.NAMESPACE_OID, f"{old}{copy}")))
        for line in chunk.splitlines():
            record = json.loads(line)
            if record.get("uuid") and record.get("parentUuid") is None and last:
                record["parentUuid"] = last
            if record.get("type") in ("user", "assistant"):
                last = record["uuid"]
            lines.append(json.dumps(record) + "\n")
    return lines


def main() -> None:
    copies = int(sys.argv[1]) if len(sys.argv) > 1 else 107
    adapter = adapter_for("claude-code")
    lines = transcript(copies)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.jsonl"
        path.write_text("".join(lines[:-10]), encoding="utf-8")
        start = time.perf_counter()
        sessions = adapter.read([path])
        full = time.perf_counter() - start
        _, cursor = adapter.read_incremental(path, None)
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines[-10:]))
        start = time.perf_counter()
        new, cursor = adapter.read_incremental(path, cursor)
        incremental = time.perf_counter() - start
        size = path.stat().st_size
    messages = len(sessions[0].messages)
    print(f"lines {len(lines)}  bytes {size}  messages {messages}")
    print(
        f"full read        {full * 1000:8.1f} ms  ({len(lines) / full:,.0f} lines/s, {size / full / 1e6:.1f} MB/s)"
    )
    print(
        f"incremental (+10 lines) {incremental * 1000:8.1f} ms  bytes read {cursor['bytes_read']}"
        f"  new messages {len(new[0].messages)}"
    )


if __name__ == "__main__":
    main()
