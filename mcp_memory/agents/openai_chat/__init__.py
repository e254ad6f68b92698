"""OpenAI / DeepSeek chat JSON: the message list a client of an OpenAI-compatible API holds; also the wire format other agents' adapters share. See README.md."""

from __future__ import annotations

from typing import ClassVar

from ..base import Adapter, Agent

NAME = "openai"  # the agent's CLI name: written here once, used by every part of the package
DISPLAY_NAME = "OpenAI / DeepSeek chat JSON"


class OpenAIChat(Agent):
    name = NAME
    display_name = DISPLAY_NAME
    write_options: ClassVar[dict[str, str]] = {
        'reasoning': "what to do with reasoning: see the adapter's README (e.g. reasoning=none)",
    }

    def adapter(self) -> Adapter:
        from .adapter import OpenAIChatAdapter

        return OpenAIChatAdapter()


AGENT = OpenAIChat()
