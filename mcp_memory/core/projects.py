"""Which project a captured or imported session belongs to, and the rule that decided it.

The rules, first match wins (README, "Projects"):

1. `flag`: the project given on the command line (`sync --project`, `import --project`, the
   import_session tool's project_id);
2. `config`: the config file's `[projects]` table, folder → project; the longest folder that holds
   the session's working folder (`mcp-memory projects map FOLDER PROJECT` writes it);
3. `file`: a `.mcp-memory-project` file in the working folder or a folder above it, whose one line
   is the project (a cloned repository brings its own: see `_read_project_file` for what is refused);
4. `session`: the project the native session names itself (a session mcp-memory exported);
5. `folder`: the name of the git repository's top folder that holds the working folder, else of the
   working folder itself;
6. `default`: the project "default".

Rules 3 and 5 look at this machine's folders only when the working folder is an absolute path that
exists here (a session file from another machine names folders of that machine).
"""

from __future__ import annotations

import logging
import os
import stat
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from ..errors import Invalid
from .sessions import check_project

log = logging.getLogger(__name__)

PROJECT_FILE = ".mcp-memory-project"
FILE_BYTES = 4096  # a project file is one short line; a bigger one is refused unread


@dataclass(frozen=True)
class Resolved:
    project: str
    rule: str  # flag | config | file | session | folder | default
    source: str | None = None  # the config folder, project file or folder the rule used
    ignored: tuple[str, ...] = ()  # project files refused on the way, each with the reason


def resolve(cwd: Any, *, explicit: str | None = None, mapping: Any = None,
            session_project: Any = None) -> Resolved:
    """The project of a session whose working folder is `cwd` (see the module docstring).
    `mapping`: the config file's `[projects]` table. Raises Invalid for a bad project name, naming
    where it came from."""
    if explicit:
        return Resolved(check_project(explicit), "flag")
    folder = _folder(cwd)
    if folder is not None:
        mapped = _mapped(folder, _mapping(mapping))
        if mapped is not None:
            return mapped
    local = Path(folder) if folder is not None and _exists_here(folder) else None
    ignored: list[str] = []
    if local is not None:
        found = _project_file(local, ignored)
        if found is not None:
            return found
    return replace(_after_file(folder, local, session_project), ignored=tuple(ignored))


def _after_file(folder: PurePath | None, local: Path | None, session_project: Any) -> Resolved:
    """Rules 4 to 6."""
    if isinstance(session_project, str) and session_project.strip():
        return Resolved(_named(session_project[:200], "the session's project"), "session")
    top = _git_top(local) if local is not None else None
    if top is not None and top.name:
        return Resolved(_named(top.name[:200], str(top)), "folder", str(top))
    if folder is not None and folder.name:
        return Resolved(_named(folder.name[:200], "the working folder's name"), "folder", str(folder))
    return Resolved("default", "default")


def _folder(cwd: Any) -> PurePath | None:
    """The working folder as a path of the kind it was written in (a Windows session's cwd read on
    Linux stays a Windows path)."""
    if not isinstance(cwd, str) or not cwd.strip() or "\x00" in cwd or len(cwd) > 4096:
        return None
    windows = (len(cwd) > 1 and cwd[1] == ":") or cwd.startswith("\\\\")
    path: PurePath = PureWindowsPath(cwd) if windows else PurePosixPath(cwd)
    return path if path.is_absolute() or path.name else None


def _mapping(mapping: Any) -> dict[PurePath, str]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise Invalid("[projects] in the config file must be a table of folder = \"project\"")
    out: dict[PurePath, str] = {}
    for folder, project in mapping.items():
        path = _folder(os.path.expanduser(folder)) if isinstance(folder, str) else None
        if path is None or not path.is_absolute():
            raise Invalid(f"[projects] in the config file: {folder!r} must be an absolute folder")
        out[path] = _named(project, f"[projects] {folder!r} in the config file")
    return out


def _mapped(folder: PurePath, mapping: dict[PurePath, str]) -> Resolved | None:
    holders = [f for f in mapping if type(f) is type(folder) and (folder == f or folder.is_relative_to(f))]
    if not holders:
        return None
    best = max(holders, key=lambda f: len(f.parts))
    return Resolved(mapping[best], "config", str(best))


def _exists_here(folder: PurePath) -> bool:
    if not folder.is_absolute() or type(folder) is not type(PurePath()):
        return False
    try:
        return Path(folder).is_dir()
    except OSError:
        return False


def _project_file(folder: Path, ignored: list[str]) -> Resolved | None:
    """The nearest project file that holds a project. One that is refused is skipped with a warning
    (also in `ignored`): a folder above may hold a good one, else the next rules decide."""
    for candidate in (folder, *folder.parents):
        path = candidate / PROJECT_FILE
        try:
            project = _read_project_file(path)
        except FileNotFoundError:
            continue
        except (OSError, Invalid) as exc:
            reason = f"{path} ignored: {exc}"
            log.warning("project file %s", reason)
            ignored.append(reason)
            continue
        return Resolved(project, "file", str(path), tuple(ignored))
    return None


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # Windows has none: the lstat check below stands alone
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted under the name must not block the open


def _read_project_file(path: Path) -> str:
    """The project a file names. A cloned repository brings its own project file, so the file is
    not trusted: a symbolic link is refused (it could point at any file of the user, whose first
    line would become a project id stored on the server), as is anything but a regular file of at
    most FILE_BYTES bytes holding one line of UTF-8 text that passes the project-id rules.
    FileNotFoundError when there is none; OSError or Invalid, with the reason, when it is refused."""
    if stat.S_ISLNK(os.lstat(path).st_mode):
        raise Invalid("it is a symbolic link (a project file must be a regular file)")
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)  # of what was opened: a swap after the lstat changes nothing
        if not stat.S_ISREG(info.st_mode):
            raise Invalid("it is not a regular file")
        if info.st_size > FILE_BYTES:
            raise Invalid(f"it has {info.st_size} bytes; a project file is one line of at most {FILE_BYTES}")
        data = os.read(fd, FILE_BYTES + 1)
    finally:
        os.close(fd)
    return _file_project(data)


def _file_project(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("it is not UTF-8 text") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise Invalid(f"it must hold one line, the project; it holds {len(lines)}")
    if any(unicodedata.category(c).startswith("C") for c in lines[0]):
        raise Invalid("its line holds control or unassigned characters")
    return check_project(lines[0])


def _git_top(folder: Path) -> Path:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def _named(project: Any, where: str) -> str:
    try:
        return check_project(project.strip() if isinstance(project, str) else project)
    except Invalid as exc:
        raise Invalid(f"{where}: {exc}") from None
