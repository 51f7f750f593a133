"""``trace_record`` takes plain steps in one walk and everything else through every check in turn:
both ways must store the same record, or refuse with the same message.

Hypothesis writes the steps as a researcher's agent might: mixed spellings of timing, numbers as
strings, tuples, datetimes, secrets at any depth, non-string keys, lone surrogates, inf and nan,
64-bit overflow, nesting near the depth limit and metadata near the size limit.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memkit import InvalidInputError, Limits
from memkit._core import _records
from memkit._core._validate import DEFAULT_LIMITS

KEYS = ["tool", "status", "step_name", "run_id", "step_index", "retry_count", "timestamp", "duration",
        "parameters", "result", "error", "metadata", "api_key", "password", "q", "elapsed_ms", "started_at",
        "ended_at", "retry_errors", "max_tokens", "é", "duration_ms", "trace", "type", "workflow_id"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["3", "1e400", "inf", "2024-01-01T00:00:00", "\ud800", "TP53"]),
    st.just(datetime(2024, 1, 1, tzinfo=UTC)), st.just(timedelta(seconds=3)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.integers(0, 2)), inner, max_size=4),
    ),
    max_leaves=12,
)
steps = st.dictionaries(st.sampled_from(KEYS), values, max_size=7)
limits = st.sampled_from([DEFAULT_LIMITS, Limits(max_metadata_depth=3), Limits(max_metadata_bytes=300),
                          Limits(max_content_chars=120)])


def _outcome(fn: Any) -> tuple[Any, ...]:
    try:
        record = fn()
    except InvalidInputError as exc:
        return ("refused", str(exc))
    return ("stored", record.user_id, record.agent_id, record.content, repr(record.metadata),
            json.loads(record.metadata_json) == record.metadata)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=steps, limit=limits)
def test_the_one_walk_and_the_checks_in_turn_agree(data: dict[str, Any], limit: Limits) -> None:
    fast = _outcome(lambda: _records.trace_record("bio", "triage", data, "u1", limit))

    try:
        _records.check_trace_fields(dict(data))
    except (InvalidInputError, RecursionError):
        assert fast[0] == "refused"  # a field of the wrong type: refused before either path
        return
    checked = _outcome(lambda: _records._checked_trace_record("bio", "triage", data, "u1", limit))
    if fast[0] == "stored":
        assert fast[-1] is True  # the stored JSON is the metadata handed back
    assert fast == checked


def test_plain_steps_take_the_one_walk() -> None:
    """The import's steps are plain: they must not fall back to the general path (its cost)."""
    step = {"step_name": "blast", "tool": "blast", "status": "success", "timestamp": 1.7e9, "duration": 0.4,
            "parameters": {"query": "seq 1", "k": [1, 2], "api_key": "sk-1"}, "result": {"hits": 3},
            "run_id": "r1", "step_index": 3, "span_id": "ab", "parent_step_index": None}
    assert _records._plain_copy(step, 2, DEFAULT_LIMITS.max_metadata_depth, _records.Redactor()) is not None
    record = _records.trace_record("bio", "triage", step, "u1")
    assert record.metadata["trace"]["parameters"]["api_key"] == _records.REDACTED
    assert "sk-1" not in record.content and "sk-1" not in (record.metadata_json or "")
