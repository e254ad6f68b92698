"""Committed files read line by line, never whole: one `git cat-file --batch` serves every file of a
restore, and each file comes back as a stream of lines bounded in length.

A line longer than the bound is not held in memory: its bytes are read and dropped, and the caller
gets TOO_LONG in its place (with the number of bytes it had), so one crafted line of hundreds of
megabytes costs a restore no more memory than a normal one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .gitrepo import _ENV, GitError

_CHUNK = 256 * 1024


@dataclass(frozen=True)
class TooLong:
    size: int  # bytes of the line (without its newline)


class BlobReader:
    """`with BlobReader(repo, rev) as reader: for line in reader.lines(path, max_line=…)` — one file at a
    time; a file's lines must be read to the end (or the iterator closed) before the next file."""

    def __init__(self, repo: Path, rev: str) -> None:
        self.repo, self.rev = repo, rev
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BlobReader:
        self._proc = subprocess.Popen(["git", "cat-file", "--batch"], cwd=self.repo, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env={**os.environ, **_ENV})
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc.wait()
            self._proc = None

    def lines(self, path: str, *, max_line: int) -> Iterator[bytes | TooLong]:
        """The lines of `path` at the reader's rev (without their newline); TooLong for each line over
        `max_line` bytes. Nothing for a path that is missing there."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{self.rev}:{path}\n".encode())
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3 or header[-1] == b"missing":
            if len(header) < 2:
                raise GitError(f"git cat-file stopped answering while reading {path}")
            return
        try:
            yield from _split(proc.stdout, int(header[2]), max_line)
        finally:
            proc.stdout.read(1)  # the newline after each object


def _split(stream: IO[bytes], size: int, max_line: int) -> Iterator[bytes | TooLong]:
    """Lines of the next `size` bytes of `stream`; always consumes exactly `size` bytes, even when
    the consumer stops early (the generator's cleanup drains the rest)."""
    pending = bytearray()
    dropped = 0  # > 0 while inside a line already over the bound
    left = size
    try:
        while left:
            chunk = stream.read(min(_CHUNK, left))
            if not chunk:
                raise GitError("git cat-file ended in the middle of a file")
            left -= len(chunk)
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if dropped or len(pending) + len(piece) > max_line:
                    dropped += len(pending) + len(piece)
                    pending.clear()
                else:
                    pending += piece
                if end < 0:
                    break
                yield TooLong(dropped) if dropped else bytes(pending)
                pending.clear()
                dropped, start = 0, end + 1
        if pending or dropped:
            yield TooLong(dropped) if dropped else bytes(pending)
    finally:
        while left:  # the consumer stopped early: keep the batch stream in step
            chunk = stream.read(min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
