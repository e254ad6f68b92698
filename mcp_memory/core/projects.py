"""Which project a captured or imported session belongs to, and the rule that decided it.

The rules, first match wins (README, "Projects"):

1. `flag`: the project given on the command line (`sync --project`, `import --project`, the
   import_session tool's project_id);
2. `config`: the config file's `[projects]` table, folder → project; the longest folder that holds
   the session's working folder (`mcp-memory projects map FOLDER PROJECT` writes it);
3. `file`: a `.mcp-memory-project` file in the working folder or a folder above it, whose first line
   is the project;
4. `session`: the project the native session names itself (a session mcp-memory exported);
5. `folder`: the name of the git repository's top folder that holds the working folder, else of the
   working folder itself;
6. `default`: the project "default".

Rules 3 and 5 look at this machine's folders only when the working folder is an absolute path that
exists here (a session file from another machine names folders of that machine).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from ..errors import Invalid
from .sessions import check_project

PROJECT_FILE = ".mcp-memory-project"
FILE_BYTES = 4096  # a project file is one short line; more is not read


@dataclass(frozen=True)
class Resolved:
    project: str
    rule: str  # flag | config | file | session | folder | default
    source: str | None = None  # the config folder, project file or folder the rule used


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
    if local is not None:
        found = _project_file(local)
        if found is not None:
            return found
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


def _project_file(folder: Path) -> Resolved | None:
    for candidate in (folder, *folder.parents):
        path = candidate / PROJECT_FILE
        try:
            if not path.is_file():
                continue
            with open(path, "rb") as fh:
                head = fh.read(FILE_BYTES)
        except OSError:
            continue
        line = head.decode("utf-8", errors="replace").splitlines()[0].strip() if head.strip() else ""
        return Resolved(_named(line, str(path)), "file", str(path))
    return None


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
