"""Core benchmarks: every number is reported next to the physical limit measured in the same run on
the same server (raw psycopg INSERT/COPY/SELECT, the SDK's own no-op tool), as a ratio.

    python scripts/bench/core_bench.py                 # embedded server in a temporary profile
    python scripts/bench/core_bench.py --dsn postgresql://…  [--quick] [--json]

(a) append over MCP stdio vs (no-op tool round trip + raw INSERT+COMMIT)   target ≤ 1.5×
(b) 8 agents (8 stdio servers) into 8 sessions vs 8 raw psycopg writers     target ≥ 0.5×
(c) append_messages of 10k messages vs raw COPY of the same payloads         target ≤ 5×
The search index follows the appends in its own transaction (core/indexer.py): (a) and (c) also
report when it caught up, as a reference.
(d) read_session last page of a 100k-message session vs the first page      target ≤ 1.5×
(e) `serve` start → first tools/list answer vs a bare MCPServer, and RSS      target ≤ 1.3×
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import psycopg
from bench_server import bench_server
from psycopg.types.json import Jsonb

from mcp_memory.config import load_settings
from mcp_memory.wiring import build

NOOP_SERVER = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(stream=sys.stderr, level="WARNING")
    from mcp.server.mcpserver import MCPServer
    server = MCPServer("noop", version="1")
    @server.tool()
    def noop(session_id: str, message: dict) -> dict:
        return {"seq": 1, "duplicate": False}
    server.run("stdio")
""")


class StdioPeer:
    """A minimal JSON-RPC client over a subprocess's stdio (same cost for both servers)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, text=True, bufsize=1)
        self.next_id = 0

    def call(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                          "params": params or {}}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def handshake(self) -> float:
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        self.proc.stdin.flush()
        self.call("tools/list")
        return time.perf_counter() - self.started

    def tool(self, name: str, arguments: dict) -> dict:
        reply = self.call("tools/call", {"name": name, "arguments": arguments})
        result = reply["result"]
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])
        return result.get("structuredContent") or {}

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def raw_table(dsn: str) -> str:
    name = f"bench_raw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (session_id text, seq bigint, append_id text, role text, "
                     "payload jsonb, created_at timestamptz DEFAULT now(), PRIMARY KEY (session_id, seq))")
    return name


def drop(dsn: str, table: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def raw_insert_latencies(dsn: str, table: str, n: int, session: str = "s") -> list[float]:
    out = []
    with psycopg.connect(dsn) as conn:
        for i in range(n):
            t = time.perf_counter()
            conn.execute(f"INSERT INTO {table} (session_id, seq, append_id, role, payload) VALUES (%s,%s,%s,%s,%s)",
                         (session, i + 1, f"a{i}", "user", Jsonb({"role": "user", "content": f"message {i}"})))
            conn.commit()
            out.append(time.perf_counter() - t)
    return out


def message(i: int, prefix: str = "m") -> dict:
    return {"append_id": f"{prefix}{i}", "role": "user", "content": f"message {i} " + "lorem ipsum " * 8}


def bench_a(dsn: str, env: dict[str, str], n: int, rounds: int = 5) -> dict:
    """The three are measured in interleaved rounds (raw, no-op, ours), so that a machine whose
    speed drifts during the run (a shared VM) weighs on all three alike."""
    table = raw_table(dsn)
    noop = StdioPeer([sys.executable, "-c", NOOP_SERVER], env)
    noop.handshake()
    serve = StdioPeer([sys.executable, "-m", "mcp_memory", "serve"], env)
    serve.handshake()
    sid = serve.tool("create_session", {"project_id": "bench"})["session_id"]
    for i in range(20):  # warm the pool
        serve.tool("append_message", {"session_id": sid, "message": message(i, "w")})
    raw, noop_lat, ours = [], [], []
    per_round = max(1, n // rounds)
    try:
        with psycopg.connect(dsn) as conn:
            for r in range(rounds):
                for i in range(per_round):
                    t = time.perf_counter()
                    conn.execute(f"INSERT INTO {table} (session_id, seq, append_id, role, payload) VALUES (%s,%s,%s,%s,%s)",
                                 ("s", r * per_round + i + 1, f"a{i}", "user", Jsonb(message(i))))
                    conn.commit()
                    raw.append(time.perf_counter() - t)
                for i in range(per_round):
                    t = time.perf_counter()
                    noop.tool("noop", {"session_id": "s", "message": message(i)})
                    noop_lat.append(time.perf_counter() - t)
                for i in range(per_round):
                    t = time.perf_counter()
                    serve.tool("append_message", {"session_id": sid, "message": message(r * per_round + i)})
                    ours.append(time.perf_counter() - t)
        indexed_after = _time_until_indexed(dsn, sid)
    finally:
        serve.close()
        noop.close()
        drop(dsn, table)
    limit50 = statistics.median(noop_lat) + statistics.median(raw)
    limit99 = pct(noop_lat, 99) + pct(raw, 99)
    return {"append_p50_ms": statistics.median(ours) * 1e3, "append_p99_ms": pct(ours, 99) * 1e3,
            "noop_p50_ms": statistics.median(noop_lat) * 1e3, "raw_insert_commit_p50_ms": statistics.median(raw) * 1e3,
            "ratio_p50": statistics.median(ours) / limit50, "ratio_p99": pct(ours, 99) / limit99, "target": "≤ 1.3",
            "searchable_after_last_append_ms": indexed_after * 1e3}


def _time_until_indexed(dsn: str, session_id: str) -> float:
    """Seconds from now until the server's background pass has indexed the whole session (the
    search index follows appends once they pause; a search would index them itself at once)."""
    t = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT indexed_seq >= stored_seq FROM search_progress WHERE session_id = %s",
                               (session_id,)).fetchone()
            if row and row[0]:
                return time.perf_counter() - t
            time.sleep(0.005)


def bench_b(dsn: str, env: dict[str, str], per_agent: int, agents: int = 8) -> dict:
    table = raw_table(dsn)
    try:
        threads = [threading.Thread(target=raw_insert_latencies, args=(dsn, table, per_agent, f"s{k}"))
                   for k in range(agents)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        raw_rate = agents * per_agent / (time.perf_counter() - t)
    finally:
        drop(dsn, table)
    ours_rate = _drive_agents([sys.executable, "-m", "mcp_memory", "serve"], env, agents, per_agent, "append_message")
    noop_rate = _drive_agents([sys.executable, "-c", NOOP_SERVER], env, agents, per_agent, "noop")
    return {"agents": agents, "ours_msgs_per_s": ours_rate, "raw_msgs_per_s": raw_rate,
            "noop_mcp_calls_per_s": noop_rate, "ratio": ours_rate / raw_rate, "target": "≥ 0.5",
            "ratio_vs_noop_mcp": ours_rate / noop_rate}


def _drive_agents(argv: list[str], env: dict[str, str], agents: int, per_agent: int, tool: str) -> float:
    """Calls per second of `agents` stdio servers, each driven by its own client process (no shared GIL)."""
    driver = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from core_bench import StdioPeer, message
        peer = StdioPeer({argv!r}, {env!r})
        peer.handshake()
        sid = peer.tool("create_session", {{"project_id": "bench-b"}})["session_id"] if {tool!r} != "noop" else "s"
        peer.tool({tool!r}, {{"session_id": sid, "message": message(0, "warm")}})
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        sys.stdin.readline()
        for i in range({per_agent}):
            peer.tool({tool!r}, {{"session_id": sid, "message": message(i)}})
        peer.close()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", driver], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(agents)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    t = time.perf_counter()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        proc.wait(timeout=600)
    return agents * per_agent / (time.perf_counter() - t)


def bench_c(dsn: str, svc, n: int, rounds: int = 3) -> dict:
    """Median of `rounds` interleaved runs of each (a shared 2-core machine is noisy)."""
    raws, ours, index = [], [], []
    for r in range(rounds):
        messages = [message(i, f"c{r}-") for i in range(n)]
        table = raw_table(dsn)
        try:
            with psycopg.connect(dsn) as conn:
                t = time.perf_counter()
                with conn.cursor() as cur, cur.copy(f"COPY {table} (session_id, seq, append_id, role, payload) FROM STDIN") as cp:
                    for i, m in enumerate(messages):
                        cp.write_row(("s", i + 1, m["append_id"], m["role"], Jsonb(m)))
                conn.commit()
                raws.append(time.perf_counter() - t)
        finally:
            drop(dsn, table)
        sid = svc.create_session("bench-c").session_id
        t = time.perf_counter()
        svc.append_messages(sid, messages)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        svc.indexer.flush()  # the search index of the batch, which follows in its own transaction
        index.append(time.perf_counter() - t)
    raw, mine = statistics.median(raws), statistics.median(ours)
    return {"messages": n, "append_messages_s": mine, "raw_copy_s": raw, "ratio": mine / raw, "target": "≤ 5",
            "then_search_index_s": statistics.median(index)}


def bench_d(svc, n: int, repeats: int = 30) -> dict:
    sid = svc.create_session("bench-d").session_id
    for start in range(0, n, 10_000):
        svc.append_messages(sid, [message(i) for i in range(start, min(n, start + 10_000))])
    svc.indexer.flush()  # reads are measured on their own, not next to the index pass of 100k messages

    def timed(after: int) -> float:
        samples = []
        for _ in range(repeats):
            t = time.perf_counter()
            page = svc.read_session(sid, after_seq=after, limit=100)
            samples.append(time.perf_counter() - t)
            assert len(page.messages) == 100
        return statistics.median(samples)

    timed(0)
    first, last = timed(0), timed(n - 100)
    return {"messages": n, "first_page_ms": first * 1e3, "last_page_ms": last * 1e3, "ratio": last / first,
            "target": "≤ 1.5"}


def bench_e(env: dict[str, str], repeats: int) -> dict:
    def start(argv: list[str], tool: str) -> tuple[float, int, int]:
        peer = StdioPeer(argv, env)
        elapsed = peer.handshake()
        rss = peer.rss_kib()
        peer.tool(tool, {"limit": 1} if tool == "list_sessions" else {"session_id": "s", "message": message(0)})
        in_use = peer.rss_kib()  # after a first call: the service, psycopg and the pool are loaded
        peer.close()
        return elapsed, rss, in_use

    ours = [start([sys.executable, "-m", "mcp_memory", "serve"], "list_sessions") for _ in range(repeats)]
    bare = [start([sys.executable, "-c", NOOP_SERVER], "noop") for _ in range(repeats)]
    o, b = statistics.median(x[0] for x in ours), statistics.median(x[0] for x in bare)
    return {"serve_start_ms": o * 1e3, "bare_start_ms": b * 1e3, "ratio": o / b, "target": "≤ 1.2",
            "serve_rss_mib": statistics.median(x[1] for x in ours) / 1024,
            "bare_rss_mib": statistics.median(x[1] for x in bare) / 1024,
            "serve_rss_after_first_call_mib": statistics.median(x[2] for x in ours) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="server to measure (default: a temporary embedded server)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a fast run")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="abcde", help="which parts to run, e.g. --only ac (default: all)")
    args = parser.parse_args()
    with bench_server(args.dsn) as (dsn, _, env):
        env = {**env, "MCP_MEMORY_DSN": dsn}
        svc = build(load_settings(dsn=dsn, environ=env))
        svc.db.pool()
        n_a, n_b, n_d = (200, 100, 20_000) if args.quick else (1000, 300, 100_000)
        parts = {
            "a": ("a_append_latency", lambda: bench_a(dsn, env, n_a)),
            "b": ("b_concurrent_agents", lambda: bench_b(dsn, env, n_b)),
            "c": ("c_batch_10k", lambda: bench_c(dsn, svc, 10_000)),
            "d": ("d_last_vs_first_page", lambda: bench_d(svc, n_d)),
            "e": ("e_startup", lambda: bench_e(env, 3 if args.quick else 7)),
        }
        results: dict[str, object] = {"server": svc.db.masked_dsn()}
        for letter, (name, run) in parts.items():
            if letter in args.only:
                results[name] = run()
        svc.db.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, values in results.items():
        if isinstance(values, dict):
            print(f"{name}: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                         for k, v in values.items()))
        else:
            print(f"{name}: {values}")


if __name__ == "__main__":
    main()
