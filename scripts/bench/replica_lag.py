"""Replica lag under a steady write load, on a real PostgreSQL 15 primary and its streaming hot
standby (scripts/ops/replica_pair.py: a throwaway pair on free ports, removed at the end).

A writer appends at a steady rate through a Service on the primary; after each acknowledged
append it notes the primary's WAL insert position. A sampler polls the standby's replay position
every `--poll-ms`; an append's *visibility lag* is the time from its acknowledgement to the first
sample whose replay position has passed it. Sampled alongside: the primary's own view
(pg_stat_replication.replay_lag), and a reader through a Service with `read_dsn` (a host that
does not write) reading the writer's session: where each read ran and how many acknowledged
appends it did not see yet.

    python scripts/bench/replica_lag.py [--rate 50] [--seconds 20] [--size 1200] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ops"))
from replica_pair import ReplicaPair

from mcp_memory.config import load_settings
from mcp_memory.store import migrate, replicas
from mcp_memory.wiring import build

TEXT = ("The standby replays what the primary wrote; 备用服务器重放主服务器写入的内容，读取可以在那里完成。 "
        "Searches and lists may run there while appends stay on the primary. ")


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


class Routes(logging.Handler):
    """Counts where the routed reader's reads ran (store/replicas.py logs each route)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.replica = 0
        self.primary = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "routed to replica" in message:
            self.replica += 1
        elif "routed to the primary" in message:
            self.primary += 1


def run(args: argparse.Namespace) -> dict[str, object]:
    pair = ReplicaPair(Path(args.pg_bin)).start()
    try:
        with psycopg.connect(pair.dsn(pair.primary), autocommit=True) as conn:
            conn.execute("CREATE DATABASE mm")
        migrate.migrate(pair.dsn(pair.primary, "mm"))
        pair.wait_replayed()
        home = tempfile.mkdtemp(prefix="mm-replica-bench-")
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}, "MCP_MEMORY_HOME": home}
        base = load_settings(dsn=pair.dsn(pair.primary, "mm"), environ=env)
        writer = build(base)
        reader = build(replace(base, read_dsns=(pair.dsn(pair.standby, "mm"),), max_replica_lag=args.max_lag))
        try:
            return measure(pair, writer, reader, args)
        finally:
            writer.db.close()
            reader.db.close()
            shutil.rmtree(home, ignore_errors=True)
    finally:
        pair.close()


def measure(pair: ReplicaPair, writer, reader, args: argparse.Namespace) -> dict[str, object]:
    sid = writer.create_session("bench-replica").session_id
    pair.wait_replayed()
    acked: list[tuple[float, str]] = []  # (acknowledged at, insert position after it)
    samples: list[tuple[float, str]] = []
    stat_lag: list[float] = []
    staleness: list[int] = []
    stop = threading.Event()
    routes = Routes()
    logging.getLogger(replicas.__name__).addHandler(routes)
    logging.getLogger(replicas.__name__).setLevel(logging.DEBUG)

    def sample() -> None:
        with psycopg.connect(pair.dsn(pair.standby), autocommit=True) as standby, \
                psycopg.connect(pair.dsn(pair.primary), autocommit=True) as primary:
            ticks = 0
            while not stop.is_set():
                row = standby.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
                samples.append((time.perf_counter(), row[0] if row else "0/0"))
                ticks += 1
                if ticks % 20 == 0:
                    lag = primary.execute("SELECT extract(epoch FROM replay_lag) FROM pg_stat_replication").fetchone()
                    if lag and lag[0] is not None:
                        stat_lag.append(float(lag[0]))
                time.sleep(args.poll_ms / 1000)

    def read() -> None:
        while not stop.is_set():
            seen_before = len(acked)
            visible = reader.get_session(sid).last_seq
            staleness.append(max(seen_before - visible, 0))
            time.sleep(0.05)

    threads = [threading.Thread(target=sample), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    body = (TEXT * (args.size // len(TEXT) + 1))[:args.size]
    with psycopg.connect(pair.dsn(pair.primary), autocommit=True) as position:
        started = time.perf_counter()
        for n in range(int(args.rate * args.seconds)):
            due = started + n / args.rate
            time.sleep(max(0.0, due - time.perf_counter()))
            writer.append_message(sid, {"role": "user" if n % 2 else "assistant", "content": f"{n} {body}"})
            row = position.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            acked.append((time.perf_counter(), row[0] if row else "0/0"))
        elapsed = time.perf_counter() - started
    time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    logging.getLogger(replicas.__name__).removeHandler(routes)
    return {"rate_per_s": args.rate, "achieved_per_s": round(len(acked) / elapsed, 1), "seconds": args.seconds,
            "appends": len(acked), "message_chars": args.size,
            "poll_ms": args.poll_ms, "visibility_lag": percentiles(visibility(acked, samples)),
            "pg_stat_replication_replay_lag": percentiles(stat_lag),
            "routed_reader": {"reads_on_replica": routes.replica, "reads_on_primary": routes.primary,
                              "appends_not_yet_visible": {"p50": statistics.median(staleness) if staleness else None,
                                                          "max": max(staleness, default=None)}},
            "load_average": os.getloadavg()}


def visibility(acked: list[tuple[float, str]], samples: list[tuple[float, str]]) -> list[float]:
    """For each acknowledged append: the first sample at or after it whose replay passed its position."""
    lags = []
    index = 0
    points = [(at, replicas.lsn_value(lsn)) for at, lsn in samples]
    for at, lsn in acked:
        target = replicas.lsn_value(lsn)
        while index < len(points) and points[index][0] < at:
            index += 1
        found = next((t for t, replayed in points[index:] if replayed >= target), None)
        if found is not None:
            lags.append(found - at)
    return lags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=50.0, help="appends per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--size", type=int, default=1200, help="characters per message")
    parser.add_argument("--poll-ms", type=float, default=2.0, help="how often the standby's replay position is read")
    parser.add_argument("--max-lag", type=float, default=1.0, help="the routed reader's [database] max_replica_lag")
    parser.add_argument("--pg-bin", default="/usr/lib/postgresql/15/bin")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
