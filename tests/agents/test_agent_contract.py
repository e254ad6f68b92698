"""Every agent in the registry names itself once: the registry, the Agent, its adapter and its
installer all take the name from the package's NAME."""

from __future__ import annotations

import inspect
from importlib import import_module

import pytest

from mcp_memory import agents
from mcp_memory.agents.install_support import Installer


@pytest.mark.parametrize("name", agents.names())
def test_one_name_per_agent(name: str) -> None:
    agent = agents.get(name)
    package = import_module(type(agent).__module__)
    assert (package.NAME, agent.name, agent.adapter().name) == (name, name, name)
    assert agent.display_name == agent.adapter().display_name == package.DISPLAY_NAME
    installer = agent.installer()
    if installer is not None:  # the Installer interface: the same keyword arguments and defaults
        expected = dict(inspect.signature(Installer.register).parameters)
        expected.pop("self")
        assert inspect.signature(installer.register).parameters.keys() == expected.keys()
        assert all(p.kind is p.KEYWORD_ONLY for p in inspect.signature(installer.register).parameters.values())


def test_names_are_unique_and_unknown_ones_are_refused() -> None:
    assert len(set(agents.names())) == len(agents.names())
    with pytest.raises(ValueError, match="unknown agent 'robot'; choose one of: claude-code"):
        agents.get("robot")
