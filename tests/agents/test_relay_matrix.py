"""Relay matrix: every fixture of every agent, through every agent and back (no database).

source → neutral → target → neutral must keep each user and assistant text and each tool call with
its result; thinking, system texts and renamed tools may change only where the target's write report
says so, and so may what a target format cannot hold (its adapter's `cannot_hold`: tool calls in
Aider's Markdown history become reply text), a mapped loss rather than an error. An agent whose adapter does not import, or that has no recorded fixtures, fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_fixtures import fixtures

from mcp_memory.agents import adapter_for, names
from mcp_memory.agents.relay import available_agents, relay

STATUS = available_agents()
MUST_KEEP = ("user text", "assistant text", "tool pair")


def _cases() -> list[object]:
    cases: list[object] = []
    for source in names():
        found = fixtures(source)
        for target in names():
            if not found:  # a case all the same, which fails naming what is missing
                cases.append(pytest.param(source, target, None, id=f"{source}->{target}"))
            for path in found:
                cases.append(pytest.param(source, target, path, id=f"{source}->{target}:{path.name}"))
    return cases


@pytest.mark.parametrize(("source", "target", "fixture"), _cases())
def test_hop_keeps_the_conversation(source: str, target: str, fixture: Path | None, tmp_path: Path) -> None:
    for agent in (source, target):
        assert STATUS[agent] is None, f"the {agent} adapter does not import: {STATUS[agent]}"
    assert fixture is not None, f"no {source} fixtures: record some under tests/fixtures/ (globs in agent_fixtures.py)"
    hops = relay(source, target, fixture, out_dir=tmp_path)
    assert any(sum(hop.kept.values()) for hop in hops), f"nothing came back from {fixture}"
    unheld = adapter_for(target).cannot_hold
    for hop in hops:
        for category in (c for c in MUST_KEEP if c not in unheld):
            assert not hop.lost[category], f"{category}: {hop.lost[category]} lost ({hop.report.to_dict()})"
        assert not hop.unexplained, f"lost without a word in the write report: {hop.unexplained}"


def test_matrix_script_prints_a_table_and_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import runpy
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "relay_matrix.py"
    for argv, check in (
        ([], lambda out: "source \\ target" in out),
        (["--json"], lambda out: json.loads(out)),
    ):
        monkeypatch.setattr(sys, "argv", [str(script), *argv])
        with pytest.raises(SystemExit):
            runpy.run_path(str(script), run_name="__main__")
        assert check(capsys.readouterr().out)
