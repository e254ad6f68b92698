"""Measure the redaction rules: how many fake secrets of the test corpus are caught, how many benign
look-alikes (hashes, UUIDs, base64, code) are touched, and how many lines of real code and
configuration files (tests/redaction_samples/, provenance in its SOURCES.md) are changed. Exit 1
below the targets (≥ 98 % caught, ≤ 1 % false positives on the corpus, and ≤ 1 % of the sample lines
that hold a key word such as password, token, secret or key).

    python scripts/redaction_report.py [--corpus tests/redaction_corpus.json] [--samples DIR] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mcp_memory.security.redact import Redactor

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "redaction_corpus.json"
DEFAULT_SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "redaction_samples"
MIN_CATCH = 0.98
MAX_FALSE_POSITIVE = 0.01
# a sample line that could tempt a rule: it names a credential (the other lines are counted too)
KEY_WORD = re.compile(r"(?i)pass|pwd|secret|token|key|credential|auth")


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


@dataclass(frozen=True)
class SampleReport:
    files: int
    lines: int  # non-empty lines
    keyword_lines: int  # of which name a credential
    changed: list[dict[str, str]]

    @property
    def changed_rate(self) -> float:
        return len(self.changed) / self.lines if self.lines else 0.0

    @property
    def keyword_rate(self) -> float:
        return len(self.changed) / self.keyword_lines if self.keyword_lines else 0.0

    @property
    def ok(self) -> bool:
        return self.keyword_rate <= MAX_FALSE_POSITIVE


def measure_samples(folder: Path, redactor: Redactor | None = None) -> SampleReport:
    """Each file is redacted whole (as a message holding it would be); every line that comes out
    different counts as a false positive, whatever the reason."""
    redactor = redactor or Redactor()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    lines = keyword_lines = 0
    changed: list[dict[str, str]] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        before, after = text.splitlines(), redactor.redact(text)[0].splitlines()
        for number, (old, new) in enumerate(zip(before, after, strict=True), 1):
            lines += bool(old.strip())
            keyword_lines += bool(KEY_WORD.search(old))
            if old != new:
                changed.append({"where": f"{path.relative_to(folder)}:{number}", "text": old.strip(),
                                "redacted": new.strip()})
    return SampleReport(files=len(files), lines=lines, keyword_lines=keyword_lines, changed=changed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES, help="folder of real code and config files")
    parser.add_argument("--verbose", action="store_true", help="list every miss and false positive")
    args = parser.parse_args(argv)
    report = measure(json.loads(args.corpus.read_text(encoding="utf-8")))
    samples = measure_samples(args.samples)
    print(f"secrets caught:  {report.caught}/{report.secrets} = {report.catch_rate:.1%} (target ≥ {MIN_CATCH:.0%})")
    print(f"false positives: {report.false_positives}/{report.benign} = {report.false_positive_rate:.1%} "
          f"(target ≤ {MAX_FALSE_POSITIVE:.0%})")
    print(f"real files:      {len(samples.changed)} of {samples.lines} lines changed = {samples.changed_rate:.2%}; "
          f"of the {samples.keyword_lines} lines naming a credential {samples.keyword_rate:.2%} "
          f"(target ≤ {MAX_FALSE_POSITIVE:.0%}; {samples.files} files)")
    for kind, (hit, total) in report.by_kind.items():
        print(f"  {kind:<20} {hit}/{total}")
    if args.verbose:
        for item in report.missed:
            print(f"MISSED   {item['kind']}: {item['text'][:120]!r}")
        for item in report.touched:
            print(f"TOUCHED  {item['kind']}: {item['text'][:80]!r} -> {item['redacted'][:80]!r}")
        for item in samples.changed:
            print(f"CHANGED  {item['where']}: {item['text'][:80]!r} -> {item['redacted'][:80]!r}")
    return 0 if report.ok and samples.ok else 1


if __name__ == "__main__":
    sys.exit(main())
