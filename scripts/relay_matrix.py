"""Print the relay matrix: for every fixture of every agent, source → neutral → target → neutral.

Each cell sums over the source agent's fixtures: `kept/total` facts (user/assistant/system texts,
tool calls with their results, thinking) that came back, and `rN` = items the target's write
report names as dropped. A `!` marks a loss the write report does not name; `ERR` an exception.

    python scripts/relay_matrix.py            # table
    python scripts/relay_matrix.py --json     # one JSON document with every hop
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the recorded fixtures

from agent_fixtures import fixtures

from mcp_memory.agents.relay import Hop, available_agents, relay


def run() -> tuple[list[str], dict[str, str], list[Hop]]:
    status = available_agents()
    agents = [name for name, error in status.items() if error is None]
    hops: list[Hop] = []
    for source in agents:
        for fixture in fixtures(source):
            for target in agents:
                try:
                    hops.extend(relay(source, target, fixture))
                except Exception as exc:  # noqa: BLE001 - the matrix lists every failing pair instead of stopping
                    hops.append(Hop(source=source, target=target, fixture=fixture.name, error=repr(exc)))
    skipped = {name: error for name, error in status.items() if error is not None}
    return agents, skipped, hops


def cell(hops: list[Hop]) -> str:
    if not hops:
        return "-"
    if any(hop.error for hop in hops):
        return "ERR"
    kept = sum(sum(hop.kept.values()) for hop in hops)
    total = kept + sum(sum(hop.lost.values()) for hop in hops)
    flag = "!" if any(hop.unexplained for hop in hops) else ""
    return f"{kept}/{total} r{sum(hop.reported for hop in hops)}{flag}"


def table(agents: list[str], hops: list[Hop]) -> str:
    rows = [["source \\ target", *agents]]
    for source in agents:
        rows.append(
            [source, *(cell([h for h in hops if h.source == source and h.target == t]) for t in agents)]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)) for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print every hop as JSON instead of the table")
    args = parser.parse_args()
    agents, skipped, hops = run()
    if args.json:
        print(
            json.dumps({"agents": agents, "skipped": skipped, "hops": [h.to_dict() for h in hops]}, indent=2)
        )
    else:
        print(table(agents, hops))
        for name, error in skipped.items():
            print(f"skipped {name}: {error}")
        for hop in hops:
            if hop.error or hop.unexplained:
                print(
                    f"{hop.source} → {hop.target} {hop.fixture}: {hop.error or 'unreported loss ' + ', '.join(hop.unexplained)}"
                )
    return 1 if any(hop.error or hop.unexplained for hop in hops) else 0


if __name__ == "__main__":
    raise SystemExit(main())
