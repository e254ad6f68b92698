"""Writing files that agents read: atomically (a temporary file in the same folder, then rename),
so an agent never sees half a session or half a config, and a crash leaves the old file intact."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, text: str, *, new_mode: int | None = None) -> None:
    """Replace `path` with `text`. An existing file keeps its permissions; a new one gets
    `new_mode` (None: the process umask, as for any file the agent itself would write)."""
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
