"""Peak memory of `mcp-memory serve` fed one huge stdio request (default 100 MB).

Starts `serve` on the given DSN, answers the handshake, records the idle peak RSS (VmHWM), sends one
`append_message` whose content is SIZE_MB megabytes, waits for the answer and reports the peak RSS
again, as MB and as a ratio to the idle peak measured in the same run. `--pythonpath DIR` runs the
code found in DIR instead (e.g. an older checkout, to compare).

    python scripts/bench/stdio_rss.py --dsn postgresql://… [--size-mb 100] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--pythonpath")
    args = parser.parse_args()
    env = {**os.environ, "MCP_MEMORY_DSN": args.dsn}
    command = [sys.executable, "-m", "mcp_memory", "serve"]
    if args.pythonpath:  # ahead of an editable install's import hook too
        code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
                "sys.argv = ['mcp-memory', 'serve']; from mcp_memory.cli import main; sys.exit(main())")
        command = [sys.executable, "-c", code, args.pythonpath]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        proc.stdout.readline()
        send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "create_session", "arguments": {"project_id": "bench"}}})
        sid = json.loads(proc.stdout.readline())["result"]["structuredContent"]["session_id"]
        time.sleep(2.0)  # the warm-up has built the service
        idle = peak_rss_mb(proc.pid)
        content = "x" * (args.size_mb * 1024 * 1024)
        started = time.monotonic()
        send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "append_message", "arguments": {"session_id": sid, "message": {"role": "user", "content": content}}}})
        del content
        reply = json.loads(proc.stdout.readline())
        took = time.monotonic() - started
        peak = peak_rss_mb(proc.pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    text = reply.get("result", {}).get("content", [{}])[0].get("text") or json.dumps(reply)[:200]
    import_path = args.pythonpath or "this checkout"
    print(f"[{import_path}] idle peak RSS {idle:.0f} MB; after a {args.size_mb} MB request: {peak:.0f} MB "
          f"({peak / idle:.1f}x idle), answered in {took:.1f} s: {text[:120]}")


def send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


if __name__ == "__main__":
    main()
