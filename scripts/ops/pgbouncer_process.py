"""A PgBouncer process for a drill, a benchmark or a test: started on an ini that is already written,
waited for until it listens, stopped by its own PID (and its folder removed) when the block ends."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_SECONDS = 15


@contextmanager
def pgbouncer_process(args: list[str], folder: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` (pgbouncer and its ini), its output in `folder`/pgbouncer.out, until the block ends."""
    log = (folder / "pgbouncer.out").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not start: {(folder / 'pgbouncer.out').read_text()[-2000:]}")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
