"""Periods a question is about, English and Chinese (pure): the window search favours.

- `relative_window`: "yesterday", "last week", "last month", "this month", "3 days ago", "in the
  last 2 weeks", "last year", "昨天", "上周", "上个月", "本月", "3天前", "最近两周", "去年" → since/until
  around the time the question is asked (`now`), in UTC calendar days, weeks (Monday first) and months.
- `anchor_clause`: "before the migration", "after the outage", "since the release", "迁移之前",
  "上线以后" → the direction and the event's words; the caller finds the event (a first search) and
  takes its time as the edge of the window.
- `dates_in`: explicit dates a message mentions (2025-03-14, 3月14日, March 14), so a turn written
  later about a day in the window still counts as about the window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from .dates import EN_MONTHS

ZH_NUMBERS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365, "天": 1, "日": 1, "周": 7, "星期": 7, "个星期": 7,
              "个月": 30, "月": 30, "年": 365}


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime

    def holds(self, moment: datetime) -> bool:
        return self.since <= moment < self.until


@dataclass(frozen=True)
class Anchor:
    direction: str  # "before" or "after"
    event: str  # the words naming the event
    rest: str  # the question without the anchor clause


def _day(moment: date) -> datetime:
    return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)


def _month_start(year: int, month: int) -> datetime:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _number(token: str) -> int | None:
    if token.isdigit():
        return int(token)
    if token in ("a", "an", "one"):
        return 1
    words = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "few": 3, "couple of": 2}
    if token in words:
        return words[token]
    if len(token) == 1 and token in ZH_NUMBERS:
        return ZH_NUMBERS[token]
    if token.startswith("十") or token.endswith("十") or "十" in token:
        tens, _, ones = token.partition("十")
        return ZH_NUMBERS.get(tens, 1) * 10 + ZH_NUMBERS.get(ones, 0)
    return None


_CALENDAR = [  # (pattern, what it means)
    (re.compile(r"\byesterday\b|昨天|昨晚", re.I), "yesterday"),
    (re.compile(r"\btoday\b|\bthis morning\b|今天|今早", re.I), "today"),
    (re.compile(r"\blast week\b|\bprevious week\b|上周|上个?星期|上礼拜", re.I), "last week"),
    (re.compile(r"\bthis week\b|本周|这周|这个星期", re.I), "this week"),
    (re.compile(r"\blast month\b|\bprevious month\b|上个?月(?!\d|[一二三四五六七八九十]+[日号])", re.I), "last month"),
    (re.compile(r"\bthis month\b|本月|这个月", re.I), "this month"),
    (re.compile(r"\blast year\b|去年", re.I), "last year"),
    (re.compile(r"\bthis year\b|今年", re.I), "this year"),
]
_AGO = re.compile(r"\b(\d+|an?|one|two|three|four|five|six|few|couple of)\s+(day|week|month|year)s?\s+ago\b"
                  r"|(\d+|[一两二三四五六七八九十]+)\s*(天|周|个星期|星期|个月|年)(?:以前|之前|前)", re.I)
_RECENT = re.compile(r"\b(?:in|during|over|within) the (?:last|past) (\d+|two|three|four|five|six|few|couple of)\s+"
                     r"(day|week|month|year)s?\b|(?:最近|过去|近)\s*(\d+|[一两二三四五六七八九十]+)\s*(天|周|个星期|个月|年)",
                     re.I)


def relative_window(text: str, now: datetime) -> Window | None:
    """The period a relative time expression of the question names, around `now`."""
    today = _day(now.astimezone(UTC).date())
    for pattern, meaning in _CALENDAR:
        if pattern.search(text):
            return _calendar(meaning, today)
    match = _AGO.search(text)
    if match:
        amount, unit = _number((match.group(1) or match.group(3)).lower()), (match.group(2) or match.group(4)).lower()
        if amount is not None:
            span = _UNIT_DAYS[unit]
            centre = today - timedelta(days=amount * span)
            slack = timedelta(days=max(1, span * amount // 4))
            return Window(centre - slack, centre + slack + timedelta(days=1))
    match = _RECENT.search(text)
    if match:
        amount, unit = _number((match.group(1) or match.group(3)).lower()), (match.group(2) or match.group(4)).lower()
        if amount is not None:
            return Window(today - timedelta(days=amount * _UNIT_DAYS[unit]), today + timedelta(days=1))
    return None


def _calendar(meaning: str, today: datetime) -> Window:
    monday = today - timedelta(days=today.weekday())
    month = _month_start(today.year, today.month)
    spans = {
        "yesterday": (today - timedelta(days=1), today),
        "today": (today, today + timedelta(days=1)),
        "last week": (monday - timedelta(days=7), monday),
        "this week": (monday, today + timedelta(days=1)),
        "last month": (_month_start(today.year, today.month - 1), month),
        "this month": (month, today + timedelta(days=1)),
        "last year": (datetime(today.year - 1, 1, 1, tzinfo=UTC), datetime(today.year, 1, 1, tzinfo=UTC)),
        "this year": (datetime(today.year, 1, 1, tzinfo=UTC), today + timedelta(days=1)),
    }
    since, until = spans[meaning]
    return Window(since, until)


# an English event is a determined noun phrase or a clause with a subject ("after the migration",
# "before we migrated", "since our launch"): "kept before reloading" or "since it is slow" are not
_EN_ANCHOR = re.compile(r"\b(before|prior to|after|since|following)\s+(?:the|our|we|this|that|last|a|an)\s+"
                        r"((?:(?!\b(?:what|how|who|which|where|why|did|do|does|was|were|is|are)\b)[\w.\-]+\s*){1,4}?)"
                        r"(?=[,?.;:!]|\s+(?:what|how|who|which|where|why|did|do|does|was|were|is|are)\b|$)", re.I)
_ZH_ANCHOR = re.compile(r"([\w\u3400-\u9fff .\-]{1,16}?)(之前|以前|前|之后|以后|后|以来)(?=[，,、？?。\s]|$)")
_BEFORE = {"before", "prior to", "之前", "以前", "前"}
_NOT_EVENT = re.compile(r"^(?:\d+|[一两二三四五六七八九十]+)\s*(?:天|周|个星期|星期|个月|年|days?|weeks?|months?|years?)$",
                        re.I)


def anchor_clause(text: str) -> Anchor | None:
    """"Before the migration, how …" → Anchor("before", "migration", "how …"); None when the
    question names no event (a bare "before" or a period such as "3 天前" is not an event)."""
    for pattern, event_group, word_group in ((_EN_ANCHOR, 2, 1), (_ZH_ANCHOR, 1, 2)):
        for match in pattern.finditer(text):
            event = match.group(event_group).strip(" ,，")
            if pattern is _ZH_ANCHOR:
                event = re.split(r"[，,。？?、]", event)[-1].strip()
            if len(event) < 2 or _NOT_EVENT.match(event) or relative_window(event, datetime.now(UTC)):
                continue
            word = match.group(word_group).lower()
            rest = (text[:match.start()] + " " + text[match.end():]).strip(" ,，")
            return Anchor("before" if word in _BEFORE else "after", event, rest or text)
    return None


def around(anchor: Anchor, moment: datetime) -> Window:
    """The window on the anchor's side of the event's time (the event's own day belongs to neither
    side's exclusion: a turn written the same hour may still describe the old state)."""
    if anchor.direction == "before":
        return Window(datetime(1, 1, 1, tzinfo=UTC), moment)
    return Window(moment + timedelta(minutes=1), datetime(9999, 1, 1, tzinfo=UTC))


_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_ZH_DATE = re.compile(r"(?:(\d{4})年)?(?<!\d)(1[0-2]|[1-9])月([12]\d|3[01]|[1-9])[日号]")
_EN_DATE = re.compile(r"\b(" + "|".join(EN_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I)


def dates_in(text: str, written: datetime) -> list[datetime]:
    """Explicit dates a message mentions; a date without a year is the latest such day not after
    the message was written."""
    found: list[datetime] = []
    for y, m, d in _ISO.findall(text):
        found += _safe(int(y), int(m), int(d))
    for y, m, d in _ZH_DATE.findall(text):
        found += _dated(written, int(m), int(d), int(y) if y else None)
    for month, d in _EN_DATE.findall(text):
        found += _dated(written, EN_MONTHS.index(month.lower()) + 1, int(d), None)
    return found


def _dated(written: datetime, month: int, day: int, year: int | None) -> list[datetime]:
    if year is not None:
        return _safe(year, month, day)
    this = _safe(written.year, month, day)
    if this and this[0] <= written + timedelta(days=1):
        return this
    return _safe(written.year - 1, month, day)


def _safe(year: int, month: int, day: int) -> list[datetime]:
    try:
        return [datetime(year, month, day, tzinfo=UTC)]
    except ValueError:
        return []
