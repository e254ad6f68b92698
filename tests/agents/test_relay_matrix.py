"""Relay matrix: every fixture of every agent, through every agent and back (no database).

source → neutral → target → neutral must keep each user and assistant text and each tool call with
its result; thinking, system texts and renamed tools may change only where the target's write report
says so. Agents whose adapter module does not import yet are skipped, not failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_fixtures import fixtures

from mcp_memory.agents import names
from mcp_memory.agents.relay import available_agents, relay

STATUS = available_agents()
MUST_KEEP = ("user text", "assistant text", "tool pair")


def _cases() -> list[object]:
    cases: list[object] = []
    for source in names():
        found = fixtures(source) if STATUS[source] is None else []
        for target in names():
            reason = STATUS[source] or STATUS[target]
            if reason or not found:
                why = (
                    f"adapter not importable: {reason}" if reason else f"no {source} fixtures on this machine"
                )
                cases.append(
                    pytest.param(source, target, None, id=f"{source}->{target}", marks=pytest.mark.skip(why))
                )
                continue
            for path in found:
                cases.append(pytest.param(source, target, path, id=f"{source}->{target}:{path.name}"))
    return cases


@pytest.mark.parametrize(("source", "target", "fixture"), _cases())
def test_hop_keeps_the_conversation(source: str, target: str, fixture: Path, tmp_path: Path) -> None:
    hops = relay(source, target, fixture, out_dir=tmp_path)
    assert any(sum(hop.kept.values()) for hop in hops), f"nothing came back from {fixture}"
    for hop in hops:
        for category in MUST_KEEP:
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
