"""Measure the redaction rules on the test corpus: how many fake secrets are caught, how many benign
look-alikes (hashes, UUIDs, base64, code) are touched. Exit 1 below the targets (≥ 95 % caught,
≤ 1 % false positives).

    python scripts/redaction_report.py [--corpus tests/redaction_corpus.json] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mcp_memory.security.redact import Redactor

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "redaction_corpus.json"
MIN_CATCH = 0.95
MAX_FALSE_POSITIVE = 0.01


@dataclass(frozen=True)
class Report:
    secrets: int
    caught: int
    benign: int
    false_positives: int
    missed: list[dict[str, str]]
    touched: list[dict[str, str]]
    by_kind: dict[str, tuple[int, int]]

    @property
    def catch_rate(self) -> float:
        return self.caught / self.secrets if self.secrets else 1.0

    @property
    def false_positive_rate(self) -> float:
        return self.false_positives / self.benign if self.benign else 0.0

    @property
    def ok(self) -> bool:
        return self.catch_rate >= MIN_CATCH and self.false_positive_rate <= MAX_FALSE_POSITIVE


def measure(corpus: dict, redactor: Redactor | None = None) -> Report:
    """A secret counts as caught when its text was changed; a benign text must come out unchanged."""
    redactor = redactor or Redactor()
    missed, touched = [], []
    total, hit = Counter(), Counter()
    for item in corpus["secrets"]:
        total[item["kind"]] += 1
        if redactor.redact(item["text"])[1] > 0:
            hit[item["kind"]] += 1
        else:
            missed.append(item)
    for item in corpus["benign"]:
        out, count = redactor.redact(item["text"])
        if count or out != item["text"]:
            touched.append({**item, "redacted": out})
    return Report(
        secrets=len(corpus["secrets"]), caught=len(corpus["secrets"]) - len(missed),
        benign=len(corpus["benign"]), false_positives=len(touched), missed=missed, touched=touched,
        by_kind={kind: (hit[kind], total[kind]) for kind in sorted(total)},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--verbose", action="store_true", help="list every miss and false positive")
    args = parser.parse_args(argv)
    report = measure(json.loads(args.corpus.read_text(encoding="utf-8")))
    print(f"secrets caught:  {report.caught}/{report.secrets} = {report.catch_rate:.1%} (target ≥ {MIN_CATCH:.0%})")
    print(f"false positives: {report.false_positives}/{report.benign} = {report.false_positive_rate:.1%} "
          f"(target ≤ {MAX_FALSE_POSITIVE:.0%})")
    for kind, (hit, total) in report.by_kind.items():
        print(f"  {kind:<20} {hit}/{total}")
    if args.verbose:
        for item in report.missed:
            print(f"MISSED   {item['kind']}: {item['text'][:120]!r}")
        for item in report.touched:
            print(f"TOUCHED  {item['kind']}: {item['text'][:80]!r} -> {item['redacted'][:80]!r}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
