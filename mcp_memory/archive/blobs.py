"""Committed files read line by line, never whole: one `git cat-file --batch` serves every file of a
restore, and each file comes back as a stream of lines bounded in length; commit messages come the
same way from one `git log`.

A line longer than the bound is not held in memory: its bytes are read and dropped, and the caller
gets TOO_LONG in its place (with the number of bytes it had), so one crafted line of hundreds of
megabytes costs a restore no more memory than a normal one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
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


def commit_messages(repo: Path, rev: str, *, max_bytes: int, tags: str | None = None) -> Iterator[bytes | TooLong]:
    """The full message of every commit reachable from `rev` (and, with `tags`, from the tags matching
    that pattern), oldest first, streamed from one `git log` (TooLong for a message over `max_bytes`):
    a long history never sits in memory."""
    tagged = [f"--tags={tags}"] if tags else []
    proc = subprocess.Popen(["git", "log", "--reverse", "--format=%B%x00", rev, *tagged, "--"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, **_ENV})
    assert proc.stdout is not None
    try:
        for record in _records(proc.stdout.read, max_bytes, b"\x00"):
            yield record if isinstance(record, TooLong) else record.strip(b"\n")
    finally:
        proc.stdout.close()
        if proc.wait() not in (0, -13):  # -13: SIGPIPE, the consumer stopped early
            raise GitError(f"git log {rev} failed (exit {proc.returncode})")


def _split(stream: IO[bytes], size: int, max_line: int) -> Iterator[bytes | TooLong]:
    """Lines of the next `size` bytes of `stream`; always consumes exactly `size` bytes, even when
    the consumer stops early (the generator's cleanup drains the rest)."""
    left = size

    def read(n: int) -> bytes:
        nonlocal left
        if not left:
            return b""
        chunk = stream.read(min(n, left))
        if not chunk:
            raise GitError("git cat-file ended in the middle of a file")
        left -= len(chunk)
        return chunk

    try:
        yield from _records(read, max_line, b"\n")
    finally:
        while read(_CHUNK):  # the consumer stopped early: keep the batch stream in step
            pass


def _records(read: Callable[[int], bytes], max_len: int, sep: bytes) -> Iterator[bytes | TooLong]:
    """The `sep`-separated records of what `read` returns until it returns b"" (a last record without
    its separator included), each as bytes or, over `max_len`, as TooLong (its bytes dropped)."""
    pending = bytearray()
    dropped = 0  # > 0 while inside a record already over the bound
    while chunk := read(_CHUNK):
        start = 0
        while True:
            end = chunk.find(sep, start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if dropped or len(pending) + len(piece) > max_len:
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
