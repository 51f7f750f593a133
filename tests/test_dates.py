"""Date terms: absolute dates, relative ones resolved against the memory's own date, query granularity."""

from __future__ import annotations

import pytest

from memkit._retrieval._dates import TIME_REFERENCE, date_terms, query_date_terms

STAMP = "[1:56 pm on 8 May, 2023] Caroline: "  # a Monday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to a support group yesterday", {"ymd20230507"}),
        ("we watched it last night", {"ymd20230507"}),
        ("tonight is the party", {"ymd20230508"}),
        ("I'll come over tomorrow", {"ymd20230509"}),
        ("I ran a charity race last Sunday", {"ymd20230507"}),
        ("the adoption meeting was last Friday", {"ymd20230505"}),
        ("next Friday we go", {"ymd20230512"}),
        ("I painted that last year", {"y2022"}),
        ("we're going camping next month", {"ym202306"}),
        ("I moved here 4 years ago", {"y2019"}),
        ("it was three months ago", {"ym202302"}),
        ("two weeks ago we hiked", {"ym202304"}),
        ("I signed up last week", {"ym202305"}),
    ],
)
def test_relative_dates_resolve_against_the_memory_date(text: str, expected: set[str]) -> None:
    terms = date_terms(STAMP + text)
    assert expected <= set(terms), terms
    assert TIME_REFERENCE in terms
    assert {"ymd20230508", "ym202305", "y2023", "m05"} <= set(terms)  # its own date


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("on 2023-07-14 the run failed", "ymd20230714"),
        ("born on July 4th, 1990", "ymd19900704"),
        ("the 3rd of March 2021", "ymd20210303"),
        ("back in January 2022", "ym202201"),
        ("Sept 2020", "ym202009"),
    ],
)
def test_absolute_dates(text: str, expected: str) -> None:
    assert expected in date_terms(text)


def test_no_date_no_terms_and_words_that_look_like_months_are_words() -> None:
    assert date_terms("the aligner mapped reads to the genome") == []
    assert date_terms("you may want to march on") == []
    assert date_terms("Caroline: I went there yesterday") == [TIME_REFERENCE]  # nothing to resolve against
    assert date_terms(STAMP + "I love painting") == ["ymd20230508", "ym202305", "y2023", "m05"]


def test_impossible_dates_are_ignored() -> None:
    assert "ymd20230231" not in date_terms("on 31 February, 2023")


def test_query_terms_keep_the_granularity_asked_for() -> None:
    assert query_date_terms("What movie did Joanna watch on 1 May, 2022?") == ["ymd20220501"]
    assert query_date_terms("Where did Joanna travel to in July 2022?") == ["ym202207"]
    assert query_date_terms("What did Melanie paint in 2022?") == ["y2022"]
    assert query_date_terms("When did Melanie go camping in June?") == ["m06", TIME_REFERENCE]
    assert set(query_date_terms("a pride parade during the summer")) == {"m06", "m07", "m08"}
    assert query_date_terms("What does Caroline like?") == []
    assert query_date_terms("How long has Nate had his turtles?") == [TIME_REFERENCE]


@pytest.mark.parametrize("text", ["\ud800 yesterday", "x" * 100_000 + " last week", "99 years ago", "0 May, 2023"])
def test_odd_text_never_raises(text: str) -> None:
    date_terms(STAMP + text)
    query_date_terms(text)
