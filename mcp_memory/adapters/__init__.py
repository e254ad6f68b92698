"""Agent adapters: one module per agent, looked up by CLI name through this registry."""

from __future__ import annotations

from importlib import import_module

from .base import Adapter, MappingReport, NeutralSession, WriteOptions, WrittenSession

__all__ = ["ADAPTERS", "Adapter", "MappingReport", "NeutralSession", "WriteOptions", "WrittenSession", "get"]

# CLI name -> "module:Class"; modules are imported on demand so `serve` never pays for them.
ADAPTERS: dict[str, str] = {
    "claude-code": "claude_code:ClaudeCodeAdapter",
    "opencode": "opencode:OpenCodeAdapter",
    "codex": "codex:CodexAdapter",
    "gemini": "gemini:GeminiAdapter",
    "hermes": "hermes:HermesAdapter",
    "deepseek-harness": "deepseek_harness:DeepSeekHarnessAdapter",
    "openai": "openai_chat:OpenAIChatAdapter",
}


def get(name: str) -> Adapter:
    try:
        target = ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; choose one of: {', '.join(ADAPTERS)}") from None
    module_name, class_name = target.split(":")
    module = import_module(f"{__name__}.{module_name}")
    return getattr(module, class_name)()
