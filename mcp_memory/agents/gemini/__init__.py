"""Gemini CLI: chats under `~/.gemini/tmp/<project>/chats/`, MCP entry in `settings.json`. See README.md."""

from __future__ import annotations

from typing import ClassVar

from ..base import Adapter, Agent
from ..install_support import Installer

NAME = "gemini"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "Gemini CLI"


class Gemini(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'refresh_last_updated': '1: set lastUpdated to now, so the session sorts first in `gemini --resume`',
    }

    def adapter(self) -> Adapter:
        from .adapter import GeminiAdapter

        return GeminiAdapter()

    def installer(self) -> Installer:
        from . import install

        return install


AGENT = Gemini()
