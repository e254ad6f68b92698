"""The agents mcp-memory speaks with: one package per agent, found by CLI name through this registry.

Each package (`claude_code/`, `opencode/`, …) holds the agent's reader, writer, capture and install
code and a README.md with the format facts they rely on; its `__init__.py` defines `AGENT`, an
`Agent` whose parts are imported only when used, so `serve` never pays for them. Adding an agent is
one package, one line below and its recorded fixtures under tests/fixtures/.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module

from .base import (
    Adapter,
    Agent,
    CaptureTarget,
    FormatError,
    MappingReport,
    NeutralSession,
    WriteOptions,
    WrittenSession,
)

__all__ = ["Adapter", "Agent", "CaptureTarget", "FormatError", "MappingReport", "NeutralSession", "WriteOptions",
           "WrittenSession", "adapter_for", "get", "installable", "names"]

# the packages below this one, in the order the CLI lists them; each names its agent once (NAME)
_PACKAGES: tuple[str, ...] = (
    "claude_code",
    "opencode",
    "codex",
    "gemini",
    "hermes",
    "deepseek_harness",
    "openai_chat",
    "copilot",
    "qwen_code",
    "kilo",
    "aider",
)


@cache
def _registry() -> dict[str, str]:
    """CLI name → package, read from each package's NAME (its `__init__` is small: the parts load
    on first use)."""
    return {import_module(f"{__name__}.{package}").NAME: package for package in _PACKAGES}


# `recall --hook` without --agent: the session-start hooks installed before --agent existed
SESSION_START_DEFAULT = "claude-code"


def names() -> list[str]:
    """Every agent's CLI name, in a stable order."""
    return list(_registry())


def get(name: str) -> Agent:
    try:
        package = _registry()[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; choose one of: {', '.join(_registry())}") from None
    agent: Agent = import_module(f"{__name__}.{package}").AGENT
    return agent


def installable() -> list[str]:
    """The agents that `mcp-memory install` can register with (those that launch MCP servers)."""
    return [name for name in _registry() if get(name).can_install]


def adapter_for(name: str) -> Adapter:
    """A new adapter of agent `name`'s format."""
    return get(name).adapter()
