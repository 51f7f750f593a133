"""Dates in memories and queries, as index terms the keyword leg can match.

A memory like ``"[2:01 pm on 23 January, 2022] Nate: I watched it last night"`` is
about 22 January 2022, and a question "what did Nate watch on 22 January 2022?"
should find it although no word of the date is shared. So the keyword analyzer
adds *date terms* to what it indexes:

* every absolute date in the text (``8 May, 2023``, ``May 8th 2023``, ``2023-05-08``,
  ``January 2022``) becomes terms for its day, month and year;
* relative expressions (``yesterday``, ``last week``, ``last Friday``,
  ``three years ago``, ``next month``) are resolved against the memory's own date
  (the first absolute day-level date of its text, as a chat log's timestamp prefix
  carries) and become the same terms;
* a query's dates become terms at the granularity the query names (a day, a month
  of a year, a year, a month of any year, a season), so "in July 2022" matches
  every memory about July 2022 and nothing else;
* a memory that says when something happened (a relative expression, or a date
  besides its own) gets the term ``timeref``, and so does a question that asks
  when ("when did ...", "how long ...", "what year ..."): the turn that answers it
  usually names the time.

Terms are plain ASCII tokens (``ymd20220122``, ``ym202201``, ``y2022``, ``m01``)
that survive the tokenizer and stemmer unchanged; their BM25 weight comes from
how rare the date is in the namespace, like any word.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection

__all__ = ["TIME_REFERENCE", "date_terms", "query_date_terms"]

TIME_REFERENCE = "timeref"
_ASKS_WHEN = re.compile(r"^\W*(?:when|how long|what (?:year|month|day|date|time))\b|\bhow long ago\b")

_MONTH_NAMES = [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
                ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
                ("october", "oct"), ("november", "nov"), ("december", "dec")]
_MONTHS = {name: number for number, names in enumerate(_MONTH_NAMES, start=1) for name in names}
_FULL_NAMES = frozenset(names[0] for names in _MONTH_NAMES)
_AMBIGUOUS = frozenset(["may", "march"])
_WEEKDAYS = {name: i for i, name in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "couple": 2, "few": 3}
_SEASONS = {"spring": (3, 4, 5), "summer": (6, 7, 8), "autumn": (9, 10, 11), "fall": (9, 10, 11),
            "winter": (12, 1, 2)}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Each pattern names the groups it has; the first that matches at a position wins.
_ABSOLUTE = [
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b"),
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH}\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*(?:am|pm|:))"),
    re.compile(rf"\b{_MONTH}\b"),
    re.compile(rf"\b{_YEAR}\b"),
]
# One pass finds every stretch of text that could hold a date; the patterns above then run on those
# stretches only (and a few characters after them, for the lookahead), not over the whole text.
_SPAN = re.compile(
    r"\b(?:(?:19|20)\d\d-[01]\d-[0-3]\d"
    rf"|(?:[0-3]?\d(?:st|nd|rd|th)?\s+(?:of\s+)?)?{_MONTH.replace('?P<month>', '?:')}(?:\s+[0-3]?\d(?:st|nd|rd|th)?)?"
    r"(?:,?\s+(?:19|20)\d\d)?"
    r"|(?:19|20)\d\d)\b"
)
# A date gives terms only with a year or a full, unambiguous month name, and both are whole words
# in every match (their edges are word boundaries or spaces), so they are among the text's tokens;
# every match of _RELATIVE holds one of _RELATIVE_WORDS as a whole word too. A text without such
# tokens skips that pattern: a trace step's JSON is full of digits, and scanning it for dates cost
# more than tokenising it.
_CENTURIES = ("19", "20")
_ASCII_YEARS = frozenset(f"{year}" for year in range(1900, 2100))
_ABSOLUTE_WORDS = _FULL_NAMES - _AMBIGUOUS | _ASCII_YEARS
_RELATIVE_WORDS = frozenset(["yesterday", "today", "tonight", "tomorrow", "last", "next", "this", "past", "ago",
                             "later", "now"])
_UNITS = r"(?P<unit>day|week|weekend|month|year)s?"
_COUNT = r"(?P<count>\d{1,2}|" + "|".join(_NUMBERS) + r")"
_RELATIVE = re.compile(
    r"\b(?:(?P<word>yesterday|today|tonight|tomorrow)"
    r"|(?P<which>last|next|this|past)\s+(?P<what>night|week|weekend|month|year|summer|winter|spring|fall|"
    + "|".join(_WEEKDAYS) + r")"
    + rf"|{_COUNT}\s+(?:of\s+)?{_UNITS}\s+(?P<dir>ago|later|from now))\b"
)


def _valid(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _month_shift(day: dt.date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _day_terms(day: dt.date) -> list[str]:
    return [f"ymd{day:%Y%m%d}", f"ym{day:%Y%m}", f"y{day:%Y}", f"m{day:%m}"]


def _month_terms(year: int, month: int) -> list[str]:
    return [f"ym{year:04d}{month:02d}", f"y{year:04d}", f"m{month:02d}"]


def _absolute(text: str) -> list[tuple[int, int, list[str], dt.date | None]]:
    """``(start, end, terms, day)`` of every absolute date in ``text`` (day: a full date, else None)."""
    found: list[tuple[int, int, list[str], dt.date | None]] = []
    taken: list[tuple[int, int]] = []
    spans = []
    for span in _SPAN.finditer(text):
        word = span.group()
        if word.isalpha():  # a month name alone: the common case, decided without the patterns
            if word in _FULL_NAMES and word not in _AMBIGUOUS:
                found.append((span.start(), span.end(), [f"m{_MONTHS[word]:02d}"], None))
        elif word.isdigit():  # a year alone
            found.append((span.start(), span.end(), [f"y{word}"], None))
        else:
            spans.append((span.start(), min(len(text), span.end() + 4)))
    for pattern in _ABSOLUTE if spans else ():
        for match in (m for start, end in spans for m in pattern.finditer(text, start, end)):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            parts = match.groupdict()
            month = int(parts["mnum"]) if parts.get("mnum") else _MONTHS.get((parts.get("month") or "").lower())
            year = int(parts["year"]) if parts.get("year") else None
            day_number = int(parts["day"]) if parts.get("day") else None
            terms: list[str] = []
            day = None
            if year and month and day_number:
                day = _valid(year, month, day_number)
                if day is None:
                    continue
                terms = _day_terms(day)
            elif year and month:
                terms = _month_terms(year, month)
            elif month:
                if parts["month"] in _AMBIGUOUS or parts["month"] not in _FULL_NAMES:
                    continue  # "may", "march" or "jan" alone are more often words (or names) than months
                terms = [f"m{month:02d}"]
            elif year:
                terms = [f"y{year:04d}"]
            if terms:
                taken.append((start, end))
                found.append((start, end, terms, day))
    found.sort(key=lambda f: f[0])
    return found


def _resolve(match: re.Match[str], anchor: dt.date) -> list[str]:
    parts = match.groupdict()
    word, which, what = parts["word"], parts["which"], parts["what"]
    if word:
        shift = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[word]
        return _day_terms(anchor + dt.timedelta(days=shift))
    if which:
        sign = {"last": -1, "past": -1, "next": 1, "this": 0}[which]
        if what == "night":
            return _day_terms(anchor + dt.timedelta(days=min(sign, 0))) if sign <= 0 else []
        if what in ("week", "weekend"):
            day = anchor + dt.timedelta(days=7 * sign)
            return [f"ym{day:%Y%m}", f"y{day:%Y}", f"m{day:%m}"]
        if what == "month":
            return _month_terms(*_month_shift(anchor, sign))
        if what == "year":
            return [f"y{anchor.year + sign:04d}"]
        if what in _WEEKDAYS:
            back = (anchor.weekday() - _WEEKDAYS[what]) % 7 or 7
            if sign > 0:
                return _day_terms(anchor + dt.timedelta(days=(_WEEKDAYS[what] - anchor.weekday()) % 7 or 7))
            return _day_terms(anchor - dt.timedelta(days=back))
        months = _SEASONS[what]
        year = anchor.year + (sign if sign else 0)
        return [f"ym{year:04d}{m:02d}" for m in months]
    count_text = parts["count"]
    count = int(count_text) if count_text.isdigit() else _NUMBERS[count_text]
    sign = -1 if parts["dir"] == "ago" else 1
    unit = parts["unit"]
    if unit == "year":
        return [f"y{anchor.year + sign * count:04d}"]
    if unit == "month":
        return _month_terms(*_month_shift(anchor, sign * count))
    days = count * (7 if unit in ("week", "weekend") else 1)
    day = anchor + dt.timedelta(days=sign * days)
    return _day_terms(day) if unit == "day" else [f"ym{day:%Y%m}", f"y{day:%Y}", f"m{day:%m}"]


def date_terms(text: str, words: Collection[str] | None = None) -> list[str]:
    """Date terms of a memory: its absolute dates, and relative ones resolved against its first full date.

    ``words``: the words of ``text.lower()`` (its runs of letters and digits, as the keyword
    analyser splits it) if the caller has them; most texts name no date, and the words tell that
    without running the date patterns.
    """
    lowered = text.lower()
    absolute_too = relative_too = True
    if words is not None:
        absolute_too = not _ABSOLUTE_WORDS.isdisjoint(words) or (
            # a year of other digits ("20٢٣"): \d is any decimal digit, and only ASCII has its set
            not text.isascii() and any(len(w) == 4 and w.startswith(_CENTURIES) for w in words))
        relative_too = not _RELATIVE_WORDS.isdisjoint(words)
        if not (absolute_too or relative_too):
            return []
    absolute = _absolute(lowered) if absolute_too else []
    terms = [t for _, _, found, _ in absolute for t in found]
    anchor = next((day for _, _, _, day in absolute if day is not None), None)
    relative = list(_RELATIVE.finditer(lowered)) if relative_too else []
    if anchor is not None:
        for match in relative:
            terms.extend(_resolve(match, anchor))
    if relative or len(absolute) > (1 if anchor is not None else 0):
        terms.append(TIME_REFERENCE)
    return terms


def query_date_terms(text: str) -> list[str]:
    """Date terms of a query, each date at the granularity it is named with (distinct, in order)."""
    lowered = text.lower()
    terms: list[str] = []
    for _, _, found, day in _absolute(lowered):
        if day is not None or found[0].startswith("ym"):  # the most specific term only
            terms.append(found[0])
        else:
            terms.extend(found)
    for season, months in _SEASONS.items():
        if re.search(rf"\b{season}\b", lowered):
            terms.extend(f"m{m:02d}" for m in months)
    if _ASKS_WHEN.search(lowered):
        terms.append(TIME_REFERENCE)
    return list(dict.fromkeys(terms))
