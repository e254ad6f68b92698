"""Time in questions and in messages, English and Chinese (pure).

- `is_time_question`: "when …", "what date", "how long ago", "什么时候", "哪天", "几号" …: the answer
  is a turn that says when something happened, so turns holding a time expression rank higher.
- `named_months`: months a question names ("in May", "last March", "五月", "5月"): turns written in
  that month rank higher.
- `annotate`: relative expressions of a message ("yesterday", "last week", "on Saturday", "昨天",
  "上周", "周六") followed by the date they mean, from the message's own created_at, so that a snippet
  answers "when" by itself.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

EN_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
             "november", "december"]
ZH_DIGITS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
             "十一": 11, "十二": 12}
EN_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

_TIME_QUESTION = re.compile(
    r"\bwhen\b|\bwhat (?:date|day|time|month|year)\b|\bwhich (?:date|day|month|year|week)\b|\bhow long (?:ago|after|before)\b"
    r"|什么时候|哪天|哪一天|几号|几月|哪个月|何时|多久以前|多久之前|哪年", re.IGNORECASE)
# "May" alone is also a verb: a month name counts after in/during/of/last/since/until/early/late/mid or
# before a day number, or written with a capital letter not at the start of the question
_EN_MONTH = re.compile(r"\b(?:(?:in|during|of|last|since|until|early|late|mid|this|next)\s+)(" + "|".join(EN_MONTHS)
                       + r")\b|\b(" + "|".join(m.capitalize() for m in EN_MONTHS) + r")\b", re.IGNORECASE)
_ZH_MONTH = re.compile(r"(十[一二]|[一二三四五六七八九十]|1[0-2]|[1-9])月(?!份?[0-9一二三四五六七八九十]+[日号])?")

_EN_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|this morning|last night|two days ago|the day before yesterday|last week"
    r"|(?:on |last )(?:" + "|".join(EN_WEEKDAYS) + r"))\b", re.IGNORECASE)
_ZH_RELATIVE = re.compile(r"(前天|昨天|昨晚|今天|今晚|今早|上周[一二三四五六日天]?|上个?星期[一二三四五六日天]?|(?:周|星期)[一二三四五六日天])")


def is_time_question(text: str) -> bool:
    return bool(_TIME_QUESTION.search(text))


def named_months(text: str) -> set[int]:
    months: set[int] = set()
    for match in _EN_MONTH.finditer(text):
        if match.group(1):
            months.add(EN_MONTHS.index(match.group(1).lower()) + 1)
        elif match.start(2) > 0 and match.group(2)[0].isupper():
            months.add(EN_MONTHS.index(match.group(2).lower()) + 1)
    for match in _ZH_MONTH.finditer(text):
        token = match.group(1)
        months.add(int(token) if token.isdigit() else ZH_DIGITS[token])
    return months


def has_time_expression(text: str) -> bool:
    return bool(_EN_RELATIVE.search(text) or _ZH_RELATIVE.search(text) or named_months(text)
                or re.search(r"\b\d{4}-\d{2}-\d{2}\b|\d+\s*(?:days?|weeks?|months?) ago|\d+月\d+[日号]", text))


def resolve(expression: str, day: date) -> str | None:
    """The date (or week) a relative expression written on `day` means, ISO formatted."""
    lowered = expression.lower()
    offsets = {"yesterday": 1, "last night": 1, "昨天": 1, "昨晚": 1, "two days ago": 2,
               "the day before yesterday": 2, "前天": 2, "today": 0, "tonight": 0, "this morning": 0,
               "今天": 0, "今晚": 0, "今早": 0}
    if lowered in offsets:
        return (day - timedelta(days=offsets[lowered])).isoformat()
    weekday = _weekday(lowered)
    if lowered in ("last week", "上周", "上星期", "上个星期"):
        monday = day - timedelta(days=day.weekday() + 7)
        return f"{monday.isoformat()} 那周" if lowered[0] == "上" else f"week of {monday.isoformat()}"
    if weekday is not None:
        back = (day.weekday() - weekday) % 7 or 7  # the last such weekday before the message
        if lowered.startswith(("上周", "上星期", "上个星期")):
            back = day.weekday() + 7 - weekday
        return (day - timedelta(days=back)).isoformat()
    return None


def _weekday(lowered: str) -> int | None:
    for n, name in enumerate(EN_WEEKDAYS):
        if lowered.endswith(name):
            return n
    if lowered and lowered[-1] in ZH_WEEKDAYS and lowered[:-1] in ("周", "星期", "上周", "上星期", "上个星期"):
        return ZH_WEEKDAYS[lowered[-1]]
    return None


def annotate(text: str, created_at: datetime | None) -> str:
    """Each relative expression followed by the date it means: "yesterday (2024-05-02)"."""
    if created_at is None:
        return text
    day = created_at.date()

    def add(match: re.Match[str]) -> str:
        meant = resolve(match.group(0), day)
        if meant is None:
            return match.group(0)
        return f"{match.group(0)}（{meant}）" if _ZH_RELATIVE.fullmatch(match.group(0)) else f"{match.group(0)} ({meant})"

    return _ZH_RELATIVE.sub(add, _EN_RELATIVE.sub(add, text))
