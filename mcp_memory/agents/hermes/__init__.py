"""HermesAgent: `~/.hermes/state.db` and `hermes sessions export` JSONL, MCP entry and capture hook in
`config.yaml`. See README.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import Adapter, Agent, CaptureTarget, FormatError, NeutralSession, format_guard
from ..install_support import Installer

NAME = "hermes"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "HermesAgent"


class Hermes(Agent):
    name = NAME
    display_name = DISPLAY_NAME

    def adapter(self) -> Adapter:
        from .adapter import HermesAdapter

        return HermesAdapter()

    def installer(self) -> Installer:
        from . import install

        return install

    def capture_target(
        self, *, path: Path | None, session: str | None, hook: Mapping[str, Any], environ: Mapping[str, str]
    ) -> CaptureTarget:
        """The new message rows of `state.db` (`--path`, else the profile's: Hermes runs its shell hooks
        with HERMES_HOME set), all sessions or only `--session ID`; the hook JSON is only the trigger."""
        from .capture import read_new, state_db

        db = path or state_db(environ)
        if not db.is_file():
            raise FormatError(f"no Hermes state.db at {db} (set HERMES_HOME or pass --path)")

        def read(cursor: dict[str, Any] | None) -> tuple[list[NeutralSession], dict[str, Any]]:
            with format_guard(self.display_name, [db]):
                return read_new(db, cursor, session=session)

        return CaptureTarget(key=f"{self.name}:{db.resolve()}" + (f":{session}" if session else ""), read=read)

    def watched_files(self, *, path: Path | None, environ: Mapping[str, str]) -> list[Path]:
        from .capture import state_db

        db = path or state_db(environ)
        return [db, db.with_name(db.name + "-wal")]


AGENT = Hermes()
