"""read_session(wait_seconds) wake-up latency: from an append's commit on one connection (another
Service, as another process would be) to the return of a waiting read_session on another, next to
the floor measured in the same run on the same server: a raw NOTIFY committed on one psycopg
connection until a raw LISTEN connection receives it.

    python scripts/bench/wait_bench.py                  # embedded server in a temporary profile
    python scripts/bench/wait_bench.py --dsn postgresql://…  [--rounds 200] [--json]

Target: p50 ≤ 50 ms (and the ratio to the raw NOTIFY floor is reported).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import psycopg
from bench_server import bench_server

from mcp_memory.config import load_settings
from mcp_memory.core.service import Service
from mcp_memory.wiring import build

GAP_SECONDS = 0.03  # the writer appends this long after the reader started waiting


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": statistics.median(ordered) * 1000, "p90_ms": ordered[int(len(ordered) * 0.9)] * 1000,
            "max_ms": ordered[-1] * 1000}


def wait_latency(reader: Service, writer: Service, rounds: int) -> list[float]:
    sid = writer.create_session("bench-wait").session_id
    latencies = []
    for seq in range(rounds):
        committed: list[float] = []

        def append(n: int = seq, committed: list[float] = committed) -> None:
            writer.append_message(sid, {"role": "user", "content": f"turn {n}", "append_id": f"w{n}"})
            committed.append(time.perf_counter())  # the append returns once its commit is done

        timer = threading.Timer(GAP_SECONDS, append)
        timer.start()
        page = reader.read_session(sid, after_seq=seq, wait_seconds=10)
        returned = time.perf_counter()
        timer.join()
        if [m.seq for m in page.messages] != [seq + 1]:
            raise SystemExit(f"round {seq}: the waiting read returned {page.messages!r}")
        latencies.append(max(returned - committed[0], 0.0))
    return latencies


def notify_floor(dsn: str, rounds: int) -> list[float]:
    with psycopg.connect(dsn, autocommit=True) as listener, psycopg.connect(dsn, autocommit=True) as sender:
        listener.execute("LISTEN mcp_memory_bench")
        latencies = []
        for _ in range(rounds):
            sent: list[float] = []

            def notify(sent: list[float] = sent) -> None:
                sender.execute("NOTIFY mcp_memory_bench, 'x'")
                sent.append(time.perf_counter())

            timer = threading.Timer(GAP_SECONDS, notify)
            timer.start()
            next(iter(listener.notifies(timeout=10, stop_after=1)))
            received = time.perf_counter()
            timer.join()
            latencies.append(max(received - sent[0], 0.0))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="server to measure (default: a temporary embedded server)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with bench_server(args.dsn) as (dsn, _, env):
        settings = load_settings(dsn=dsn, environ=env)
        reader, writer = build(settings), build(settings)
        try:
            ours = wait_latency(reader, writer, args.rounds)
        finally:
            reader.db.close()
            writer.db.close()
        floor = notify_floor(dsn, args.rounds)
    result = {"rounds": args.rounds, "read_session_wait": percentiles(ours), "raw_notify": percentiles(floor)}
    result["p50_ratio_to_raw_notify"] = result["read_session_wait"]["p50_ms"] / max(result["raw_notify"]["p50_ms"], 1e-3)
    result["target_p50_ms"] = 50
    result["ok"] = result["read_session_wait"]["p50_ms"] <= 50
    if args.json:
        print(json.dumps(result, indent=2))
        return
    wait, raw = result["read_session_wait"], result["raw_notify"]
    print(f"read_session(wait_seconds) wake-up after a commit elsewhere: p50 {wait['p50_ms']:.1f} ms, "
          f"p90 {wait['p90_ms']:.1f} ms, max {wait['max_ms']:.1f} ms  (target p50 ≤ 50 ms: "
          f"{'ok' if result['ok'] else 'MISSED'})")
    print(f"raw NOTIFY → LISTEN floor:                          p50 {raw['p50_ms']:.1f} ms, "
          f"p90 {raw['p90_ms']:.1f} ms  (ratio of p50s {result['p50_ratio_to_raw_notify']:.1f}×)")


if __name__ == "__main__":
    main()
