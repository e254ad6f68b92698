#!/usr/bin/env python3
"""After a restore (install/README.md, section 9): what is still to redo, checked against the database.

Run it with the owner's DSN once the database is back (`restore --from-archive` into a new database,
or a point-in-time restore). Each line is `[ok]`, `[todo]` (the database shows it is not done yet:
the line says what to run) or `[by hand]` (done on the hosts; the database cannot see it). Exits 1
while anything is `[todo]`, so a team set-up script can wait on it.

    python scripts/restore_checklist.py --dsn postgresql://mcp_owner@db/mcp_memory [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

import psycopg

CHECKS = {
    "tokens": ("SELECT count(*) FROM access_tokens t JOIN pg_roles r ON r.rolname = t.role_name "
               "WHERE NOT t.archiver", "a host token (mcp-memory token create --name HOST --project P …; "
               "then `mcp-memory login` on that host)"),
    "archiver": ("SELECT count(*) FROM access_tokens t JOIN pg_roles r ON r.rolname = t.role_name WHERE t.archiver",
                 "an archiver token (mcp-memory token create --name archiver --archiver) and its service "
                 "restarted with it (section 5)"),
    "gateway": ("SELECT count(*) FROM pg_roles r JOIN pg_auth_members m ON m.member = r.oid "
                "JOIN pg_roles g ON g.oid = m.roleid WHERE g.rolname = 'mcp_memory_gateway' AND r.rolcanlogin",
                "the gateway login of serve-http and PgBouncer (mcp-memory token gateway --name rest-gw), its "
                "password in PgBouncer's auth_file, serve-http restarted with it (sections 6, 7)"),
    "lookup": ("SELECT count(*) FROM pg_roles WHERE rolname = 'mcp_pgbouncer'",
               "with PgBouncer only: the lookup role and its password (install/pgbouncer/auth_query.sql, "
               "\\password mcp_pgbouncer, the same password in auth_file)"),
    "archiver_running": ("SELECT count(*) FROM mm_archive_nodes() WHERE leader AND alive",
                         "an archiver holding the lease (systemctl restart mcp-memory-archive)"),
    "archive_lag": ("SELECT coalesce(unarchived_sessions, 0) + coalesce(failed, 0) = 0 FROM mm_archive_metrics()",
                    "nothing waiting for the archive (mcp-memory archive status)"),
}
BY_HAND = [
    ("logins", "on each host: `mcp-memory login` with its new token (a token made after the restore target, "
               "or any token after a restore into a new cluster)"),
    ("agents", "on each host: restart the agents' MCP servers (`mcp-memory serve` holds its credentials)"),
    ("serve_http", "restart serve-http with the gateway login (section 7)"),
]


def run(dsn: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, (query, todo) in CHECKS.items():
            try:
                value = conn.execute(query).fetchone()[0]  # type: ignore[index]
            except psycopg.Error as exc:
                rows.append({"name": name, "state": "todo", "detail": f"{todo} ({exc.diag.message_primary})"})
                continue
            ok = bool(value) if isinstance(value, bool) else int(value) > 0
            rows.append({"name": name, "state": "ok" if ok else "todo", "detail": todo})
    rows += [{"name": name, "state": "by hand", "detail": detail} for name, detail in BY_HAND]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True, help="the owner's DSN of the restored database")
    parser.add_argument("--json", action="store_true", help="one JSON document: {checks: [{name, state, detail}]}")
    args = parser.parse_args(argv)
    try:
        rows = run(args.dsn)
    except psycopg.OperationalError as exc:
        print(f"restore checklist: cannot connect: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"checks": rows}, indent=2))
    else:
        for row in rows:
            print(f"[{row['state']}] {row['name']}: {row['detail']}")
    return 1 if any(row["state"] == "todo" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
