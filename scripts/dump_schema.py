"""Regenerate mcp_memory/store/schema.sql: the schema every migration builds, as pg_dump prints it.

    mcp-memory --dsn postgresql://…/scratch db migrate       # a fresh, empty database first
    python scripts/dump_schema.py --dsn postgresql://…/scratch

The database must be freshly migrated and hold pgvector (as the embedded server does), so that the
optional semantic-search tables are in the file. tests/integration/test_schema_file.py checks the result.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp_memory.store import embedded
from mcp_memory.store.schema_dump import SCHEMA_FILE, dump


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True, help="a freshly migrated database")
    parser.add_argument("--pg-dump", type=Path, help="the pg_dump to run (default: the embedded server's)")
    args = parser.parse_args()
    SCHEMA_FILE.write_text(dump(args.dsn, args.pg_dump or embedded.binaries() / "pg_dump"), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")


if __name__ == "__main__":
    main()
