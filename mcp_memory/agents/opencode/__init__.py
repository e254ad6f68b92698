"""OpenCode 1.x: sessions in `opencode.db` (SQLite; older versions: JSON storage), capture from the
plugin that install adds, import through `opencode import`. See README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import Adapter, Agent, CaptureTarget
from ..install_support import Installer

NAME = "opencode"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "OpenCode"


class OpenCode(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'opencode_model': 'PROVIDER/MODEL stamped on the messages (default with --install: the model in your opencode.json, else the original)',
        'opencode_agent': 'the OpenCode agent the messages belong to (default: build)',
        'opencode_drop_snapshots': '1: leave out snapshot and patch parts',
    }

    def adapter(self) -> Adapter:
        from .adapter import OpenCodeAdapter

        return OpenCodeAdapter()

    def session_start_output(self, context: str) -> dict[str, Any]:
        # what our plugin reads from `recall --hook --agent opencode` and appends to the session's
        # system prompt (plugin.js, `experimental.chat.system.transform`; README.md §Capture)
        return {"system": context}

    def installer(self) -> Installer:
        from . import install

        return install

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """`--session ID` reads that session (and its children) from the database (`--path` or the
        default `opencode.db`); otherwise the file named by `--path`."""
        if not session:
            return super().capture_target(path=path, session=session, hook=hook, environ=environ)
        from .adapter import default_db_path, read_session_from_db

        db_path = path or default_db_path(environ)
        return CaptureTarget(key=f"{self.name}:{db_path}:{session}",
                             read=lambda cursor: read_session_from_db(db_path, session, cursor))


AGENT = OpenCode()
