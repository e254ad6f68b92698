"""The second hop's pure parts: which first-pass turns seed it, and how its finds are interleaved."""

from __future__ import annotations

import pytest


def test_second_hop_seeds_are_the_strong_hits_and_its_finds_slot_in_below_the_first_pass() -> None:
    from mcp_memory.retrieval.bridge import interleave, seeds
    from mcp_memory.retrieval.tuning import DEFAULT

    first = {("a", 1): 10.0, ("a", 2): 8.0, ("a", 3): 2.0}
    assert seeds(first, DEFAULT.seed_share, DEFAULT.seed_turns) == [("a", 1), ("a", 2)]  # 2.0 is below half the best
    fused = interleave(first, {("b", 1): 5.0, ("b", 2): 4.0, ("a", 3): 3.0, ("b", 4): 1.0}, 0.9)
    assert fused[("b", 1)] == 9.0 and fused[("b", 2)] == pytest.approx(7.2)
    assert fused[("a", 3)] == 2.0  # the higher of its own score and its slot (0.9 × 2.0)
    assert fused[("b", 4)] == pytest.approx(1.8)  # past the first pass's end: its last score
    assert max(fused, key=fused.__getitem__) == ("a", 1)
