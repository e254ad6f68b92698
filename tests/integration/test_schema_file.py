"""store/schema.sql is the schema the migrations build: a migrated database, dumped, equals it; and
the file, run with psql on an empty database, builds that same schema."""

from __future__ import annotations

import difflib
from pathlib import Path

import psycopg
import pytest

from mcp_memory.store import embedded
from mcp_memory.store.schema_dump import REGENERATE, SCHEMA_FILE, apply, dump, normalise


def _skip_without_pgvector(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is None:
            pytest.skip("the server has no pgvector: the file describes the schema with the optional "
                        "semantic-search tables (the embedded server has it)")


def _diff(expected: str, actual: str, expected_name: str, actual_name: str) -> str:
    return "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), expected_name,
                                        actual_name, n=1))


def test_a_migrated_database_is_the_committed_schema(fresh_db: str, tmp_path: Path) -> None:
    _skip_without_pgvector(fresh_db)
    actual = dump(fresh_db, embedded.binaries() / "pg_dump")
    expected = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    if actual != expected:
        (tmp_path / "schema.sql").write_text(actual, encoding="utf-8")
    diff = _diff(expected, actual, "store/schema.sql", "migrated database")
    assert not diff, (f"store/schema.sql is not what the migrations build (new dump: {tmp_path / 'schema.sql'}); "
                      f"regenerate it with: {REGENERATE}\n" + diff[:6000])


def test_the_schema_file_applies_to_an_empty_database(empty_db: str, fresh_db: str) -> None:
    """What a reader does with the file: psql -v ON_ERROR_STOP=1 -f, then the same dump as above."""
    _skip_without_pgvector(empty_db)
    try:
        apply(empty_db, embedded.binaries() / "psql")
    except RuntimeError as exc:
        pytest.fail(f"{exc}\nregenerate store/schema.sql with: {REGENERATE}")
    binaries = embedded.binaries() / "pg_dump"
    diff = _diff(dump(fresh_db, binaries), dump(empty_db, binaries), "migrated database", "psql -f store/schema.sql")
    assert not diff, f"the file builds another schema than the migrations; regenerate it with: {REGENERATE}\n" + diff[:6000]


def test_normalising_drops_what_varies_between_dumps() -> None:
    raw = ("--\n-- Dumped from database version 18.1\n--\n\nSET statement_timeout = 0;\n"
           "SET transaction_timeout = 0;\nSET check_function_bodies = false;\n"
           "SELECT pg_catalog.set_config('search_path', '', false);\n\\restrict abc123\n\n\n\n"
           "CREATE TABLE public.t (\n    id bigint NOT NULL\n);\n\n\n\\unrestrict abc123\n")
    text = normalise(raw)
    assert text.endswith("\nCREATE TABLE public.t (\n    id bigint NOT NULL\n);\n")
    assert "Dumped from" not in text and "restrict" not in text and "transaction_timeout" not in text
    # what the statements need to apply in order (functions before the tables they name) stays, once
    assert text.count("SET check_function_bodies = false;\n") == 1
    assert text.count("SELECT pg_catalog.set_config('search_path', '', false);\n") == 1
