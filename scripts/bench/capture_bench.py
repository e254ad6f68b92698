"""Claude Code capture end to end, through the CLI and a real database:

- `mcp-memory import claude-code` of a large transcript: messages/s, next to a raw psycopg COPY of
  the same number of payloads on the same server (the physical limit);
- `mcp-memory sync claude-code --hook` on a 5k-line transcript with 10 new lines (what the Stop /
  SessionEnd hooks run): wall time, next to `mcp-memory --version` (the process start alone);
  SessionEnd gives hooks 1.5 s.

    python scripts/bench/capture_bench.py [--dsn DSN] [--copies 107]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).parent))
from claude_import import transcript

from mcp_memory.store import embedded


def cli(env: dict[str, str], *args: str, stdin: str | None = None) -> float:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, input=stdin,
                            capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {result.stderr[-800:]}")
    return elapsed


def raw_copy_seconds(dsn: str, path: Path) -> float:
    """COPY of the very payloads the import stores (as the adapter reads them), into a bare table."""
    from mcp_memory.agents import adapter_for

    payloads = [m.payload() for s in adapter_for("claude-code").read([path]) for m in s.messages]
    table = f"bench_copy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn) as conn:
        conn.execute(f"CREATE TABLE {table} (session_id text, seq bigint, payload jsonb)")
        conn.commit()
        start = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN") as copy:
            for i, payload in enumerate(payloads):
                copy.write_row(("s", i, Jsonb(payload)))
        conn.commit()
        elapsed = time.perf_counter() - start
        conn.execute(f"DROP TABLE {table}")
        conn.commit()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn")
    parser.add_argument("--copies", type=int, default=107, help="47-line fixture copies (107 ≈ 5k lines)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mcp-memory-bench-"))
    home.chmod(0o755)
    try:
        dsn = args.dsn or embedded.ensure_running(home / "pg", allow_root=True)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")},
               "MCP_MEMORY_DSN": dsn, "MCP_MEMORY_HOME": str(home / "profile")}
        lines = transcript(args.copies)
        big = home / "big.jsonl"
        big.write_text("".join(lines), encoding="utf-8")
        cli(env, "db", "migrate")
        imported = cli(env, "import", "claude-code", str(big), "--project", "bench-import")
        count = json.loads(subprocess.run(
            [sys.executable, "-m", "mcp_memory", "sessions", "--project", "bench-import", "--json"],
            env=env, capture_output=True, text=True).stdout)["sessions"][0]["last_seq"]
        raw = raw_copy_seconds(dsn, big)
        print(f"import: {len(lines)} lines, {count} messages in {imported:.2f} s = {count / imported:,.0f} msg/s "
              f"(raw COPY of {count} payloads: {raw * 1000:.0f} ms; whole CLI run incl. process start / raw = "
              f"{imported / raw:.1f}×)")

        live = home / "live.jsonl"
        live.write_text("".join(lines[:-10]), encoding="utf-8")
        hook = json.dumps({"hook_event_name": "Stop", "transcript_path": str(live), "session_id": "bench",
                           "cwd": str(home)})
        first = cli(env, "sync", "claude-code", "--hook", "--project", "bench-sync", stdin=hook)
        samples = []
        for _ in range(5):
            with live.open("a", encoding="utf-8") as fh:
                fh.write("".join(lines[-10:]) if not samples else "")
            samples.append(cli(env, "sync", "claude-code", "--hook", "--project", "bench-sync", stdin=hook))
        start_only = statistics.median(cli(env, "--version") for _ in range(5))
        print(f"sync --hook: first (whole {len(lines) - 10}-line file) {first * 1000:.0f} ms; "
              f"+10 lines {samples[0] * 1000:.0f} ms; no new lines median {statistics.median(samples[1:]) * 1000:.0f} ms; "
              f"process start alone {start_only * 1000:.0f} ms; SessionEnd budget 1500 ms")
    finally:
        if not args.dsn:
            embedded.stop(home / "pg")
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
