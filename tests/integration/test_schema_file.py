"""store/schema.sql is the schema the migrations build: a migrated database, dumped, equals it."""

from __future__ import annotations

import difflib

import psycopg
import pytest

from mcp_memory.store import embedded
from mcp_memory.store.schema_dump import SCHEMA_FILE, dump, normalise


def test_a_migrated_database_is_the_committed_schema(fresh_db: str, tmp_path) -> None:
    with psycopg.connect(fresh_db) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            pytest.skip("the server has no pgvector: the file describes the schema with the optional "
                        "semantic-search tables (the embedded server has it)")
    actual = dump(fresh_db, embedded.binaries() / "pg_dump")
    expected = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    if actual != expected:
        (tmp_path / "schema.sql").write_text(actual, encoding="utf-8")
    diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "store/schema.sql",
                                        "migrated database", n=1))
    assert not diff, (f"store/schema.sql is not what the migrations build (new dump: {tmp_path / 'schema.sql'}; "
                      "regenerate: python scripts/dump_schema.py --dsn <a freshly migrated database>)\n"
                      + diff[:6000])


def test_normalising_drops_what_varies_between_dumps() -> None:
    raw = ("--\n-- Dumped from database version 18.1\n--\n\nSET statement_timeout = 0;\n"
           "SELECT pg_catalog.set_config('search_path', '', false);\n\\restrict abc123\n\n\n\n"
           "CREATE TABLE public.t (\n    id bigint NOT NULL\n);\n\n\n\\unrestrict abc123\n")
    assert normalise(raw).split("\n", 3)[3] == "CREATE TABLE public.t (\n    id bigint NOT NULL\n);\n"
