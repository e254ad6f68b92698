"""The duration flags of `token` (create --expires, rotate --expires and --grace, the three role
timeouts): one spelling, a whole number and a unit, each bad value refused naming the flag."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mcp_memory.errors import Invalid
from mcp_memory.security import tokens


@pytest.mark.parametrize(("value", "delta"), [
    ("9s", timedelta(seconds=9)), ("1s", timedelta(seconds=1)), ("90min", timedelta(minutes=90)),
    ("12h", timedelta(hours=12)), ("30d", timedelta(days=30)), (" 45s ", timedelta(seconds=45)),
    ("3650d", timedelta(days=3650)), ("315360000s", timedelta(days=3650)),
])
def test_expires_takes_seconds_minutes_hours_and_days(value: str, delta: timedelta) -> None:
    before = datetime.now(UTC)
    until = tokens.check_expires(value)
    after = datetime.now(UTC)
    assert until is not None and before + delta <= until <= after + delta


@pytest.mark.parametrize(("value", "rule"), [
    ("0s", "more than 0"), ("0d", "more than 0"), ("4000d", "at most 3650d"), ("315360001s", "at most 3650d"),
    ("forever", "followed by s, min, h or d"), ("9", "followed by"), ("9m", "write min for minutes"),
    ("500ms", "followed by s, min, h or d"), ("-5s", "followed by"), ("1.5h", "followed by"), ("", "followed by"),
    ("9 s", "followed by"), ("9S", "followed by"), ("99999999999d", "followed by"),
])
def test_expires_refuses_what_is_not_a_duration_naming_the_flag(value: str, rule: str) -> None:
    with pytest.raises(Invalid, match="--expires") as caught:
        tokens.check_expires(value)
    assert rule in str(caught.value) and repr(value) in str(caught.value)


def test_expires_is_optional() -> None:
    assert tokens.check_expires(None) is None


@pytest.mark.parametrize(("value", "delta"), [
    ("0s", timedelta(0)), ("30s", timedelta(seconds=30)), ("15min", timedelta(minutes=15)),
    ("1h", timedelta(hours=1)), ("30d", timedelta(days=30)),
])
def test_grace_takes_the_same_units_and_zero(value: str, delta: timedelta) -> None:
    assert tokens.check_grace(value) == delta


@pytest.mark.parametrize("value", ["31d", "5m", "soon", "-1s"])
def test_grace_refuses_bad_values_naming_the_flag(value: str) -> None:
    with pytest.raises(Invalid, match="--grace"):
        tokens.check_grace(value)


def test_role_timeouts_take_postgresql_units_within_its_range() -> None:
    limits = tokens.check_limits(statement_timeout="500ms", idle_timeout="1d", lock_timeout=" 30s")
    assert (limits.statement_timeout, limits.idle_in_transaction_timeout, limits.lock_timeout) == ("500ms", "1d", "30s")
    for flag, kwargs in (("--statement-timeout", {"statement_timeout": "25d"}),
                         ("--idle-timeout", {"idle_timeout": "0s"}),  # 0 would switch the timeout off
                         ("--lock-timeout", {"lock_timeout": "10m"})):
        with pytest.raises(Invalid, match=flag):
            tokens.check_limits(**kwargs)
