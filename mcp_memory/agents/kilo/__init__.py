"""Kilo Code CLI: an OpenCode fork. Sessions in `kilo.db` (OpenCode's schema), capture and recall from the
OpenCode plugin that install adds (loaded by Kilo too), import through `kilo import` with fresh ids. See
README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import Adapter, Agent, CaptureTarget
from ..install_support import Installer

NAME = "kilo"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Kilo Code"


class Kilo(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'opencode_model': 'PROVIDER/MODEL stamped on the messages (default with --install: the model in your kilo.json, else the original)',
        'opencode_agent': 'the agent the messages belong to (default: build)',
        'opencode_drop_snapshots': '1: leave out snapshot and patch parts',
        'kilo_fresh_ids': '1: new session, message and part ids (always with --install: kilo import skips ids it holds)',
    }

    def adapter(self) -> Adapter:
        from .adapter import KiloAdapter

        return KiloAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def session_start_output(self, context: str) -> dict[str, Any]:
        # read by the plugin (OpenCode's plugin.js) and appended to the session's system prompt
        return {"system": context}

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """`--session ID` reads that session (and its children) from `kilo.db` (`--path` or the default);
        otherwise the file named by `--path`."""
        if not session:
            return super().capture_target(path=path, session=session, hook=hook, environ=environ)
        from .adapter import default_db_path, read_session_from_db

        db_path = path or default_db_path(environ)
        return CaptureTarget(key=f"{self.name}:{db_path}:{session}",
                             read=lambda cursor: read_session_from_db(db_path, session, cursor))


AGENT = Kilo()
