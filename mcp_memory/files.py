"""Writing files that agents read: atomically (a temporary file in the same folder, then rename),
so an agent never sees half a session or half a config, and a crash leaves the old file intact."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path


class OutsideFolder(ValueError):
    """A file that would land outside the folder it was meant for (a `..`, an absolute name or a
    symbolic link that leaves it)."""


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def safe_name(name: str) -> bool:
    """True for a name that is one plain path component: letters, digits, `.`, `_`, `-`, not
    starting with a dot, at most 200 characters. Ids from session meta must pass this before they
    become file names; otherwise a hash of them is used."""
    return SAFE_NAME.fullmatch(name) is not None and ".." not in name


def inside(folder: Path, path: Path) -> Path:
    """`path`, checked to stay inside `folder` once every symbolic link that exists is followed
    (as the write would follow them); raises OutsideFolder otherwise."""
    root = Path(os.path.realpath(folder))
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(root) or target == root:
        raise OutsideFolder(f"refusing to write {path}: it is not inside {folder}")
    return path


def atomic_write(path: Path, text: str, *, new_mode: int | None = None, within: Path | None = None) -> None:
    """Replace `path` with `text`. An existing file keeps its permissions; a new one gets
    `new_mode` (None: the process umask, as for any file the agent itself would write). With
    `within`, the file must stay inside that folder (see `inside`). A symbolic link at `path`
    (a config kept in a dotfiles repository) is written through: its target is replaced."""
    if within is not None:
        inside(within, path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else new_mode
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        if mode is not None:
            os.chmod(temporary, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
