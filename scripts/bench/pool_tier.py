"""The connection tier under thousands of agents (install/pgbouncer/README.md): N simulated agents,
each a host with its OWN token and its own client connection to PgBouncer (transaction mode, the
server login forced to one gateway login, `[database] gateway = true`: each transaction proves its
token), doing the real append/search mix through the core (one Service and one connection per
agent; 80 % append_message, 20 % search_messages of its project; each agent calls at exponential
gaps of mean --think seconds, carried by 64 worker threads); then M agents on direct connections
(one backend each) for comparison; and the cost of the proof per append (the same host, direct,
with and without `gateway`). Searches index first what the project's hosts appended (the core's
catch-up), in place of one background indexer thread per agent.

    python scripts/bench/pool_tier.py --admin-dsn postgresql://postgres:…@127.0.0.1:5444/postgres \\
        [--agents 5000] [--direct-agents 1000] [--duration 60] [--think 10] [--json]

The admin DSN must be a superuser of a server you own (it creates a database, one role per agent,
a gateway and a lookup login, and drops them all afterwards). Direct agents need max_connections
above --direct-agents. PgBouncer (/usr/sbin/pgbouncer) is started on a free port and stopped by its
PID; it and this process need a file descriptor per agent (the soft limit is raised to the hard one).
Targets: 5,000 agents through the tier on at most 20 server backends, p95 < 50 ms, 0 errors.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import psycopg
from pool_tier_support import Agents, Monitor, bouncer, percentiles
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from mcp_memory.config import Settings, load_settings
from mcp_memory.security import tokens
from mcp_memory.store import migrate
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

PROJECTS = 100
WORDS = ("deploy", "rollback", "migration", "index", "latency", "cache", "token", "schema", "replica", "vacuum",
         "部署", "回滚", "索引", "缓存", "延迟")


def create_roles(owner: Database, count: int, tag: str) -> list[tokens.CreatedToken]:
    started = time.monotonic()
    with ThreadPoolExecutor(6) as pool:  # CREATE ROLE hashes the password (SCRAM): a few at once
        made = list(pool.map(lambda i: tokens.create(owner, name=f"mmbench_{tag}_{i}", projects=[f"proj-{i % PROJECTS}"]),
                             range(count)))
    print(f"  {count} token roles in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return made


def proof_cost(settings_for: Settings, token: tokens.CreatedToken, direct: str, rounds: int) -> dict[str, float]:
    """p50 of one append on the same direct login, with and without the per-transaction proof."""
    out: dict[str, float] = {}
    for gateway in (False, True, False, True):
        host = build(replace(settings_for, dsn=tokens.role_dsn(direct, token.role), password=token.token,
                             pgbouncer=True, gateway=gateway, pool_min=1, pool_max=1, auto_migrate=False),
                     application_name="bench@proof", local=False)
        try:
            sid = host.create_session(token.projects[0] if token.projects else "proj-0").session_id
            times = []
            for i in range(rounds):
                started = time.perf_counter()
                host.append_message(sid, {"role": "user", "content": f"proof cost {i}", "append_id": f"msg_{uuid.uuid4().hex}"})
                times.append(time.perf_counter() - started)
        finally:
            host.db.close()
        out[f"append_p50_ms_gateway_{str(gateway).lower()}"] = percentiles(times)["p50_ms"]  # the second run counts
    out["added_ms"] = out["append_p50_ms_gateway_true"] - out["append_p50_ms_gateway_false"]
    return out


def run_phase(name: str, settings_for: Settings, roles: list[tokens.CreatedToken], dsn_of: Callable[[str], str], *,
              pooled: bool,
              duration: float, think: float, monitor: Monitor, pooler_logins: list[str]) -> dict[str, object]:
    agents = Agents(settings_for, roles, dsn_of, pooled=pooled, words=WORDS)
    try:
        agents.start()
        monitor.reset(pooler_logins, pooled=pooled)
        results = agents.run(duration=duration, think=think)
        row = {"phase": name, "agents": len(roles), **results, "server_backends_max": monitor.peak}
        print(f"  {json.dumps(row)}", file=sys.stderr, flush=True)  # each phase as soon as it is measured
    finally:
        agents.close()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admin-dsn", required=True)
    parser.add_argument("--agents", type=int, default=5000)
    parser.add_argument("--direct-agents", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds each phase measures")
    parser.add_argument("--think", type=float, default=10.0, help="mean seconds between two calls of one agent")
    parser.add_argument("--direct-think", type=float, default=None,
                        help="the same for the direct agents (default: --think; set it to compare equal call rates)")
    parser.add_argument("--proof-rounds", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    threading.stack_size(512 * 1024)
    random.seed(7)
    tag = uuid.uuid4().hex[:6]
    dbname = f"mm_pooltier_{tag}"
    with psycopg.connect(args.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    owner_dsn = make_conninfo(args.admin_dsn, dbname=dbname)
    roles: list[tokens.CreatedToken] = []
    extra: list[str] = []
    owner = Database(load_settings(dsn=owner_dsn, environ={"MCP_MEMORY_HOME": f"/tmp/mm-pooltier-{tag}"}))
    report: dict[str, object] = {"nofile": hard, "agents": args.agents, "direct_agents": args.direct_agents,
                                 "duration_s": args.duration, "think_s": args.think,
                                 "direct_think_s": args.direct_think or args.think}
    try:
        migrate.migrate(owner_dsn)
        # agents: one connection each; logins of 5,000 agents queue at PgBouncer's SCRAM: 30 s to connect
        settings = replace(owner.settings, pool_min=1, pool_max=1, auto_migrate=False, connect_timeout=30.0)
        roles = create_roles(owner, max(args.agents, args.direct_agents), tag)
        gateway = tokens.create_gateway(owner, name=f"mmbench_{tag}_gw")
        extra.append(gateway.role)
        with bouncer(owner_dsn, gateway, max_clients=args.agents + 200, tag=tag) as (port, lookup):
            extra.append(lookup)
            target = conninfo_to_dict(owner_dsn)
            direct = make_conninfo("", host=target.get("host"), port=target.get("port"), dbname=dbname)

            def pooled_dsn(role: str) -> str:
                return make_conninfo("", host="127.0.0.1", port=port, dbname=dbname, user=role)

            report["proof"] = proof_cost(settings, roles[0], direct, args.proof_rounds)
            with Monitor(owner_dsn, dbname) as monitor:
                report["pooled"] = run_phase("pgbouncer + gateway", settings, roles[:args.agents], pooled_dsn,
                                             pooled=True, duration=args.duration, think=args.think, monitor=monitor,
                                             pooler_logins=extra)
                report["direct"] = run_phase("direct", settings, roles[:args.direct_agents],
                                             lambda role: tokens.role_dsn(direct, role), pooled=False,
                                             duration=args.duration, think=args.direct_think or args.think,
                                             monitor=monitor,
                                             pooler_logins=extra)
    finally:
        owner.close()
        with psycopg.connect(args.admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
            for role in [r.role for r in roles] + extra:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


def print_table(report: dict[str, object]) -> None:
    print(f"open files limit {report['nofile']}; each agent one call per ~{report['think_s']} s; "
          f"{report['duration_s']} s measured per phase")
    print("| path | agents | calls | calls/s | server backends (max) | p50 ms | p95 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in ("pooled", "direct"):
        row = report[key]
        assert isinstance(row, dict)
        print(f"| {row['phase']} | {row['agents']} | {row['calls']} | {row['calls_per_s']:.0f} | "
              f"{row['server_backends_max']} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} | {row['p99_ms']:.1f} | "
              f"{row['errors']} |")
    proof = report["proof"]
    assert isinstance(proof, dict)
    print(f"proof per append (same direct login): p50 {proof['append_p50_ms_gateway_false']:.2f} ms without, "
          f"{proof['append_p50_ms_gateway_true']:.2f} ms with gateway = true (+{proof['added_ms']:.2f} ms)")


if __name__ == "__main__":
    raise SystemExit(main())
