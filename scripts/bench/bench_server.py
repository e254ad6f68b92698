"""The database a benchmark measures: the server named by `--dsn`, or a throwaway embedded one in a
temporary folder, stopped and removed afterwards (a benchmark is run on purpose: as root too)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp_memory.store import embedded


@contextmanager
def bench_server(dsn: str | None) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """(DSN, a scratch folder, an environment without the caller's MCP_MEMORY_* whose profile is
    in that folder)."""
    home = Path(tempfile.mkdtemp(prefix="mcp-memory-bench-"))
    home.chmod(0o755)
    pgdir = home / "pg"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")},
           "MCP_MEMORY_HOME": str(home / "profile")}
    try:
        yield (dsn or embedded.ensure_running(pgdir, allow_root=True)), home, env
    finally:
        if not dsn:
            embedded.stop(pgdir)
        shutil.rmtree(home, ignore_errors=True)
