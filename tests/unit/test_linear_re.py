"""Possessive quantifiers written as atomic groups (mcp_memory/linear_re.py): the same regex, right on
every Python 3.11 (3.11.0-3.11.4 mismatch possessive quantifiers next to a lookahead)."""

from __future__ import annotations

import re

import pytest

from mcp_memory import linear_re


@pytest.mark.parametrize(("pattern", "written"), [
    (r"a++", r"(?>a+)"), (r"(?:ab?c)*+", r"(?>(?:ab?c)*)"), (r"((?!C).)++", r"(?>((?!C).)+)"),
    (r"[a+]{1,4}+b", r"(?>[a+]{1,4})b"), (r"(?P<q>x{1,9}+)(?P=q)", r"(?P<q>(?>x{1,9}))(?P=q)"),
    (r"(?i:a++)", r"(?i:(?>a+))"), (r"\*+ x", r"\*+ x"), (r"a+?b", r"a+?b"), (r"\{1\}+", r"\{1\}+"),
    (r"(", r"("),
])
def test_possessive_quantifiers_become_atomic_groups(pattern: str, written: str) -> None:
    assert linear_re.atomic(pattern) == written


def test_the_lookahead_case_that_older_3_11_got_wrong() -> None:
    assert linear_re.compile(r"(?:(?!')[^\n]){1,4096}+").match("hunter22'").group() == "hunter22"
    assert linear_re.compile(rb"(?:(?!')[^\n])++").match(b"ab'").group() == b"ab"
    with pytest.raises(re.error):
        linear_re.compile("(")
