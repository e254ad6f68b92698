"""A git command followed by its output: killed, with every process it started (its own process
group: the transport, ssh, a local receive-pack), once it has said nothing for `idle` seconds. A
push over a slow link goes on as long as it reports progress; a hanging one ends (gitrepo.push)."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# git's progress lines, left out of an error message
_PROGRESS = re.compile(r"^\s*(remote: )?(Enumerating|Counting|Delta|Compressing|Writing|Total|Resolving) ")


@dataclass(frozen=True)
class Finished:
    returncode: int | None
    out: str
    err: str
    stalled: bool  # nothing came for `idle` seconds: killed


def run(argv: list[str], *, cwd: Path, env: dict[str, str], idle: float,
        tick: Callable[[], None] | None = None) -> Finished:
    """Run `argv`, reading both pipes; `tick` runs about every second meanwhile. FileNotFoundError
    when the program is missing."""
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err, stalled = _follow(proc, idle=idle, tick=tick)
    finally:
        _kill_group(proc)
    return Finished(proc.returncode, out, err, stalled)


def said(err: str) -> list[str]:
    """What git said on stderr, without its progress lines."""
    return [line for line in err.replace("\r", "\n").splitlines() if not _PROGRESS.match(line)]


def _follow(proc: subprocess.Popen[bytes], *, idle: float, tick: Callable[[], None] | None) -> tuple[str, str, bool]:
    """Read both pipes until the process ends (or only children it left behind hold them); True as the
    third value when nothing came for `idle` seconds."""
    assert proc.stdout is not None and proc.stderr is not None  # Popen with PIPE for both
    streams = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    with selectors.DefaultSelector() as selector:
        for stream in streams:
            selector.register(stream, selectors.EVENT_READ)
        last = time.monotonic()
        while selector.get_map():
            for key, _ in selector.select(timeout=min(1.0, idle)):
                data = os.read(key.fd, 65536)
                if data:
                    streams[key.fileobj].extend(data)  # type: ignore[index]
                    last = time.monotonic()
                else:
                    selector.unregister(key.fileobj)
            if tick is not None:
                tick()
            if proc.poll() is not None and selector.get_map() and time.monotonic() - last > 1.0:
                break  # git is done; what still holds its pipes is a child it left behind
            if time.monotonic() - last > idle:
                return _text(streams[proc.stdout]), _text(streams[proc.stderr]), True
    proc.wait()
    return _text(streams[proc.stdout]), _text(streams[proc.stderr]), False


def _text(data: bytearray) -> str:
    return bytes(data).decode(errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left of the command's process group, then reap git and close its pipes."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
