"""Whether a test may start system PostgreSQL servers of its own (the replica pair, the restarted
server, the failover drill, the PITR drill): Debian's server binaries must be there, and a root
run needs the `postgres` user to own and run them (the server refuses to run as root)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from pathlib import Path

DEFAULT_PG_BIN = "/usr/lib/postgresql/15/bin"


def pg_bin(variable: str) -> Path:
    """The binaries' folder: the environment variable `variable` when set, else Debian's 15."""
    return Path(os.environ.get(variable, DEFAULT_PG_BIN))


def why_not(bin_dir: Path, tools: Iterable[str] = ("initdb", "pg_ctl", "postgres")) -> str | None:
    """Why servers of our own cannot run here, or None."""
    if not all((bin_dir / tool).is_file() for tool in tools):
        return f"no PostgreSQL server binaries in {bin_dir}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a `postgres` user to run the servers"
    return None
