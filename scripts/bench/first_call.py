"""The first tool call after start: `serve` is launched, `initialize` and `tools/list` answered,
then `list_sessions` is called at once, as an agent does when its model asks for a tool right away.
Reported against the same call on the warmed server in the same process (the limit: the call
itself), and the time from launch to the `tools/list` answer.

    python scripts/bench/first_call.py                 # embedded server in a temporary profile
    python scripts/bench/first_call.py --dsn postgresql://…  [--rounds 10] [--json]

Target (issue "agents end to end"): the first call answers within 300 ms of `initialize` on a
running database.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core_bench import StdioPeer

from mcp_memory.store import embedded


def one_round(env: dict[str, str]) -> dict[str, float]:
    peer = StdioPeer([sys.executable, "-m", "mcp_memory", "serve"], env)
    try:
        started = time.perf_counter()
        peer.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        initialized = time.perf_counter()
        peer.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        peer.proc.stdin.flush()
        peer.call("tools/list")
        listed = time.perf_counter()
        peer.tool("list_sessions", {"limit": 10})
        first = time.perf_counter()
        peer.tool("list_sessions", {"limit": 10})
        warm = time.perf_counter() - first
        return {"tools_list_ms": (listed - started) * 1000, "first_call_ms": (first - listed) * 1000,
                "first_after_initialize_ms": (first - initialized) * 1000, "warm_call_ms": warm * 1000}
    finally:
        peer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mcp-memory-bench-"))
    home.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
    env["MCP_MEMORY_HOME"] = str(home)
    if os.geteuid() == 0:
        env["MCP_MEMORY_EMBEDDED_AS_ROOT"] = "1"
    pgdir = home / "mcp-memory" / "pg"
    try:
        if args.dsn:
            env["MCP_MEMORY_DSN"] = args.dsn
        else:
            embedded.ensure_running(pgdir, allow_root=True)  # a running database, as the target says
        rounds = [one_round(env) for _ in range(args.rounds)]
    finally:
        if not args.dsn:
            embedded.stop(pgdir)
        shutil.rmtree(home, ignore_errors=True)
    report = {key: round(statistics.median(r[key] for r in rounds), 1) for key in rounds[0]}
    report["ratio_first_to_warm"] = round(report["first_call_ms"] / report["warm_call_ms"], 1)
    report["target"] = "first_after_initialize_ms <= 300"
    print(json.dumps(report) if args.json else ", ".join(f"{k}={v}" for k, v in report.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
