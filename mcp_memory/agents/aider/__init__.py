"""Aider: the project's `.aider.chat.history.md` (Markdown, appended to), no MCP, no hooks; capture
by `mcp-memory watch aider`, recall through a read-only file (`--read`). See README.md."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import Adapter, Agent, CaptureTarget, FormatError, NeutralSession, format_guard
from ..install_support import Installer

NAME = "aider"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Aider"


class Aider(Agent):
    name = NAME
    display_name = DISPLAY_NAME

    def adapter(self) -> Adapter:
        from .adapter import AiderAdapter

        return AiderAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """The history files of one project folder (`--path` a folder or one file; default: the
        current folder), each read from where the last run stopped."""
        from .capture import read_new

        folder, only = _where(path, environ)
        if not folder.is_dir():
            raise FormatError(f"no such project folder: {folder}")

        def read(cursor: dict[str, Any] | None) -> tuple[list[NeutralSession], dict[str, Any]]:
            with format_guard(self.display_name, [only or folder]):
                return read_new(folder, cursor, only=only)

        return CaptureTarget(key=f"{self.name}:{(only or folder).resolve()}", read=read)

    def watched_files(self, *, path: Path | None, environ: Mapping[str, str]) -> list[Path]:
        from .adapter import history_files

        folder, only = _where(path, environ)
        return [only] if only else history_files([folder])

    def recall_file(self, *, path: Path | None, environ: Mapping[str, str]) -> Path | None:
        from .install import RECALL_FILE

        folder, _ = _where(path, environ)
        return folder / RECALL_FILE


def _where(path: Path | None, environ: Mapping[str, str]) -> tuple[Path, Path | None]:
    """The project folder, and the one history file when `path` names a file."""
    if path is None:
        return Path(environ.get("PWD") or os.getcwd()), None
    if path.is_dir():
        return path, None
    return path.parent, path


AGENT = Aider()
