"""Regenerate mcp_memory/store/schema.sql: the schema every migration builds, as pg_dump prints it.

    python scripts/dump_schema.py                 # after adding a migration: rewrites the file
    python scripts/dump_schema.py --check         # exit 1 when the file is not what the migrations build

By default it starts a throw-away embedded PostgreSQL (it has pgvector, so the optional
semantic-search tables are in the file; as root set MCP_MEMORY_EMBEDDED_AS_ROOT=1), migrates a new
database there, dumps it and stops the server. `--server DSN` uses an existing server instead, whose
login may create databases and which has pgvector. tests/integration/test_schema_file.py checks the result.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from mcp_memory.store import embedded, migrate
from mcp_memory.store.schema_dump import SCHEMA_FILE, dump


@contextmanager
def _temporary_server() -> Iterator[str]:
    """A maintenance DSN of an embedded server in a new folder, stopped and removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="mcp-memory-schema-"))
    home.chmod(0o755)  # as root the server runs as another user, who must reach the folder
    allow_root = os.environ.get("MCP_MEMORY_EMBEDDED_AS_ROOT", "") in ("1", "true", "yes")
    try:
        uri = embedded.ensure_running(home / "pg", allow_root=allow_root)
        try:
            yield make_conninfo(uri, dbname="postgres")
        finally:
            embedded.stop(home / "pg")
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def _migrated_database(server: str) -> Iterator[str]:
    """A new database on `server` with every migration applied, dropped afterwards."""
    dbname = f"mm_schema_{uuid.uuid4().hex[:12]}"
    name = sql.Identifier(dbname)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        dsn = make_conninfo(server, dbname=dbname)
        migrate.migrate(dsn)
        yield dsn
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def _current_schema(server: str | None, pg_dump: Path) -> str:
    with _temporary_server() if server is None else _given(server) as admin, _migrated_database(admin) as dsn:
        return dump(dsn, pg_dump)


@contextmanager
def _given(server: str) -> Iterator[str]:
    yield make_conninfo(server, dbname="postgres")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", metavar="DSN", help="a server to migrate a scratch database on "
                        "(default: a throw-away embedded one)")
    parser.add_argument("--pg-dump", type=Path, help="the pg_dump to run (default: the embedded server's)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the file differs")
    args = parser.parse_args()
    schema = _current_schema(args.server, args.pg_dump or embedded.binaries() / "pg_dump")
    if args.check:
        same = SCHEMA_FILE.exists() and SCHEMA_FILE.read_text(encoding="utf-8") == schema
        print(f"{SCHEMA_FILE} is {'up to date' if same else 'out of date: run python scripts/dump_schema.py'}")
        return 0 if same else 1
    SCHEMA_FILE.write_text(schema, encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
