#!/usr/bin/env python3
"""Team set-up drill: install/README.md and install/pgbouncer/README.md followed step by step, with
only the commands and files they name, against a central PostgreSQL (a superuser DSN).

On that server it makes its own owner role and database (every name carries a random suffix: roles
belong to the whole cluster), runs its own PgBouncer on a free port from install/pgbouncer/'s files,
sets up two hosts (each its own HOME: config, credentials) with install/install.sh --pgbouncer, an
archiver and a standby archiver (`archive --daemon` with the guide's config.toml and archive.env;
the drill is their service manager, as the guide says where there is no systemd), serve-http on a
gateway login and a read-only reviewer token. Then, each step printed PASS or FAIL:

  doctor green on every host; a live tail through the tier (one host appends, the other's waiting
  read_session sees it); snapshots exported; `token rotate` of a host and of the archiver while
  everything runs (the printed steps followed, then the grace allowed to end); restore from the
  archive into a new database with authors (written_by) kept and archive lag 0; a
  point-in-time restore of the central database (pg_dump at the target, restored in its place),
  the guide's checklist, then new snapshots exported.

Every process it started is stopped by its own PID and every database and role it made is dropped,
also on failure. Exits 1 when a step failed.

    python scripts/ops/team_drill.py --dsn postgresql://postgres:…@127.0.0.1:5432/postgres [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from team_checks import TeamChecks
from team_setup import TeamSetup, find_binary
from team_tier import DrillFailed, Team

# the set-up steps: when one fails, the checks after it have nothing to run on
SETUP = ("central database (sections 1-2)", "tokens (section 3)", "pgbouncer tier (pgbouncer/README.md)",
         "hosts via install.sh --pgbouncer (sections 4, 6)", "archiver + standby (section 5)",
         "serve-http + reviewer (section 7)")


def steps(setup: TeamSetup, checks: TeamChecks, pgbouncer: str) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    return [
        (SETUP[0], setup.central),
        (SETUP[1], setup.create_tokens),
        (SETUP[2], lambda: setup.pgbouncer(pgbouncer)),
        (SETUP[3], setup.install_hosts),
        (SETUP[4], setup.archivers),
        (SETUP[5], setup.serve_http),
        ("doctor green on every host", checks.doctor_everywhere),
        ("live tail through the tier", checks.live_tail),
        ("snapshots exported, reviewer reads", checks.snapshots_exported),
        ("token rotate of a host", checks.rotate_host),
        ("token rotate of the archiver", checks.rotate_archiver),
        ("restore from the archive: authors kept, lag 0", checks.restore_from_archive),
        ("point-in-time restore: snapshots before the sequence step refused", checks.pitr),
        ("point-in-time restore: retry, then new snapshots exported", checks.pitr_carries_on),
        ("doctor green on every host after all that", checks.doctor_everywhere),
    ]


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    pgbouncer = find_binary("pgbouncer", None)
    pg_bin = Path(args.pg_bin) if args.pg_bin else None
    tools = {name: find_binary(name, pg_bin) for name in ("pg_dump", "pg_restore")}
    missing = [n for n, path in {"pgbouncer": pgbouncer, **tools}.items() if path is None]
    if missing:
        raise SystemExit(f"team_drill: not installed: {', '.join(missing)}")
    work = Path(tempfile.mkdtemp(prefix="mcp-memory-team-", dir=args.workdir))
    work.chmod(0o755)  # PgBouncer runs as postgres and reads its folder inside
    team = Team(args.dsn, work)
    setup = TeamSetup(team)
    checks = TeamChecks(setup, pg_dump=str(tools["pg_dump"]), pg_restore=str(tools["pg_restore"]),
                        grace=args.grace)
    results: list[dict[str, Any]] = []
    try:
        blocked = None
        for name, step in steps(setup, checks, str(pgbouncer)):
            results.append(one_step(name, step, blocked, quiet=args.json))
            if results[-1]["status"] != "PASS" and name in SETUP and blocked is None:
                blocked = name
    finally:
        checks.close()
        team.close()
    return results


def one_step(name: str, step: Callable[[], dict[str, Any]], blocked: str | None, *, quiet: bool) -> dict[str, Any]:
    started = time.monotonic()
    if blocked:
        result: dict[str, Any] = {"step": name, "status": "SKIP", "detail": f"set-up step failed: {blocked}"}
    else:
        try:
            result = {"step": name, "status": "PASS", "measured": step()}
        except DrillFailed as exc:
            result = {"step": name, "status": "FAIL", "detail": str(exc)}
        except Exception as exc:  # a bug of the drill or of mcp-memory: reported as this step's failure
            result = {"step": name, "status": "FAIL", "detail": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-2000:]}
    result["seconds"] = round(time.monotonic() - started, 1)
    if not quiet:
        print(f"{result['status']:<4}  {name}  ({result['seconds']} s)", flush=True)
        extra = result.get("measured") if result["status"] == "PASS" else result.get("detail")
        if extra:
            print(f"      {json.dumps(extra, default=str) if not isinstance(extra, str) else extra}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("MCP_MEMORY_TEST_DSN"),
                        help="a superuser DSN of the central PostgreSQL (default: $MCP_MEMORY_TEST_DSN)")
    parser.add_argument("--pg-bin", help="folder of pg_dump and pg_restore matching the server "
                        "(default: /usr/lib/postgresql/<server major>/bin, else PATH)")
    parser.add_argument("--grace", type=int, default=12, help="seconds of `token rotate --grace` (default 12)")
    parser.add_argument("--workdir", help="parent folder of the drill's own folder (default: TMPDIR)")
    parser.add_argument("--json", action="store_true", help="print one JSON report instead of lines")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn (or MCP_MEMORY_TEST_DSN) is required")
    if not args.pg_bin:
        args.pg_bin = server_bin(args.dsn)
    results = run(args)
    failed = [r["step"] for r in results if r["status"] != "PASS"]
    if args.json:
        print(json.dumps({"ok": not failed, "steps": results}, indent=2, default=str))
    else:
        print(f"{len(results) - len(failed)}/{len(results)} steps passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


def server_bin(dsn: str) -> str | None:
    """The client programs of the server's major version (pg_dump refuses a newer server)."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=10) as conn:
        major = conn.info.server_version // 10000
    folder = Path(f"/usr/lib/postgresql/{major}/bin")
    return str(folder) if folder.is_dir() else None


if __name__ == "__main__":
    sys.exit(main())
