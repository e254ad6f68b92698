"""Every agent in the registry names itself once: the registry, the Agent, its adapter and its
installer all take the name from the package's NAME; and every agent has recorded native sessions
that its adapter reads (a missing fixture fails, it is never skipped)."""

from __future__ import annotations

import inspect
from importlib import import_module

import pytest
from agent_fixtures import FIXTURE_GLOBS, fixtures

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


@pytest.mark.parametrize("name", agents.names())
def test_every_agent_reads_its_recorded_sessions(name: str) -> None:
    assert name in FIXTURE_GLOBS, f"tests/agent_fixtures.py names no fixture globs for {name}"
    found = fixtures(name)
    assert found, f"no {name} fixtures match {FIXTURE_GLOBS[name]} under tests/fixtures/"
    adapter = agents.get(name).adapter()
    for path in found:
        sessions = adapter.read_files([path])
        assert sessions and all(s.messages for s in sessions), f"{path} read as no conversation"
