"""The archive's working-tree files, opened without following links: every folder on the way is
opened with O_NOFOLLOW relative to the one before, so a symbolic link planted in the working tree
(or a file where a folder belongs) is refused instead of written through (`UnsafeArchive`)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from . import layout

if TYPE_CHECKING:
    from .gitrepo import UnsafeArchive


def read_working_file(repo: Path, relpath: str) -> bytes:
    """The working tree's content of an archive file (b"" when it does not exist), never through a link."""
    try:
        with os.fdopen(open_file(repo, relpath, os.O_RDONLY), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def append_lines(repo: Path, relpath: str, chunks: Iterable[str], *,
                 midway: Callable[[], None] | None = None) -> None:
    """Append whole lines (given in chunks) to the archive file `relpath`, then fsync."""
    fd = open_file(repo, relpath, os.O_WRONLY | os.O_APPEND | os.O_CREAT, make_dirs=True)
    with os.fdopen(fd, "ab") as f:
        for data in (chunk.encode() for chunk in chunks if chunk):
            if midway is not None:
                f.write(data[: len(data) // 2])
                f.flush()
                midway()
                data, midway = data[len(data) // 2:], None
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_if_changed(repo: Path, relpath: str, text: str) -> bool:
    data = text.encode()
    try:
        with os.fdopen(open_file(repo, relpath, os.O_RDONLY), "rb") as f:
            if f.read(len(data) + 1) == data:
                return False
    except FileNotFoundError:
        pass
    with os.fdopen(open_file(repo, relpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_dirs=True), "wb") as f:
        f.write(data)
    return True


# files of the working tree, never through a link ------------------------------------------------
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK, errno.ENOTDIR)  # EMLINK: FreeBSD's answer to O_NOFOLLOW on a link


def open_file(repo: Path, relpath: str, flags: int, *, make_dirs: bool = False) -> int:
    """A descriptor for the archive file `relpath` of `repo`, opened without following any symbolic
    link: each folder is opened O_NOFOLLOW relative to the one before, then the file O_NOFOLLOW, and it
    must be a regular file. A link (or anything else) on the way raises UnsafeArchive naming the path;
    a missing file raises FileNotFoundError. `make_dirs` creates missing folders (never through a link)."""
    if not layout.is_archive_path(relpath):
        raise _unsafe(f"{relpath}: not an archive path; the archiver writes only README.md, "
                            f"{layout.SESSIONS_DIR}/<id>.jsonl or .meta.json, {layout.DECISIONS_DIR}/<id>.jsonl "
                            f"and {layout.CONTEXT_DIR}/<id>.jsonl")
    folder, _, name = relpath.rpartition("/")
    dirfd = _open_folder(repo, folder, make_dirs=make_dirs)
    try:
        fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise _link_refused(repo, relpath) from None
        raise
    finally:
        os.close(dirfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _unsafe(f"{repo / relpath}: not a regular file in the archive's working tree; refused")
    os.set_blocking(fd, True)
    return fd


def remove_file(repo: Path, relpath: str) -> None:
    """Unlink `relpath` (a link itself, never what it points at; missing is fine)."""
    folder, _, name = relpath.rpartition("/")
    try:
        dirfd = _open_folder(repo, folder, make_dirs=False)
    except FileNotFoundError:
        return
    try:
        os.unlink(name, dir_fd=dirfd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dirfd)


def _open_folder(repo: Path, folder: str, *, make_dirs: bool) -> int:
    """A descriptor of `repo`/`folder`, each step opened O_NOFOLLOW relative to the one before."""
    fd = os.open(repo, os.O_RDONLY | _DIRECTORY | os.O_CLOEXEC)
    done: list[str] = []
    try:
        for part in folder.split("/") if folder else []:
            done.append(part)
            if make_dirs:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                step = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:
                    raise _link_refused(repo, "/".join(done)) from None
                raise
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _link_refused(repo: Path, relpath: str) -> UnsafeArchive:
    return _unsafe(f"{repo / relpath} is a symbolic link (or not a folder) in the archive's working tree; "
                         "refused, nothing written through it — remove it and run the archiver again")


def _unsafe(message: str) -> UnsafeArchive:
    from .gitrepo import UnsafeArchive  # imported here: gitrepo builds on this module

    return UnsafeArchive(message)
