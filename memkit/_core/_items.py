"""One step of a run: its status, what it did and how it failed (the seed framework's ``ExecutionItem``)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from memkit._core._errors import InvalidInputError, StorageError

FAILURE_CATEGORIES = (
    "network_error", "rate_limit_error", "validation_error", "parameter_error", "criteria_failure",
    "execution_error",
)
# A refused request for being too many: HTTP 429, or a provider's words for it.
_RATE_LIMIT = re.compile(r"\b429\b|too many requests|rate[ _-]?limit|quota (?:exceeded|exhausted)|throttl")
# A failure to reach or hear from another machine: Python's and requests/httpx/aiohttp's exception
# names, the OS's words, and the gateway statuses (502, 503, 504).
_NETWORK = re.compile(
    r"timeout|timed out|network|connection|connecterror|unreachable|name resolution|getaddrinfo|dns|"
    r"\bssl\b|remote end closed|broken pipe|reset by peer|refused|\b50[234]\b|bad gateway|service unavailable|"
    r"gateway time")


class ExecutionStatus(StrEnum):
    """Outcome of one step (values are what traces store under ``status``)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    RETRYING = "retrying"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    """Read back from a stored trace whose status is missing or not one of the above."""


# The words agents, frameworks and protocols write for a step's outcome, folded to memkit's statuses.
# Keys are lower case with "-" and " " read as "_". A cancelled step did not deliver its result: it
# counts as failed (its run is not a success), as an interrupted one does.
_STATUS_WORDS: dict[str, str] = {
    **dict.fromkeys(("success", "succeeded", "successful", "succeed", "ok", "completed", "complete", "done",
                     "finished", "passed", "pass", "unset", "status_code_ok", "status_code_unset",
                     "statuscode.ok", "statuscode.unset", "end", "ended", "true"), "success"),
    **dict.fromkeys(("failed", "failure", "fail", "error", "errored", "exception", "timeout", "timed_out",
                     "timedout", "crashed", "crash", "aborted", "abort", "cancelled", "canceled", "killed",
                     "interrupted", "terminated", "rejected", "status_code_error", "statuscode.error", "false"),
                    "failed"),
    **dict.fromkeys(("running", "in_progress", "inprogress", "started", "start", "active", "executing",
                     "processing"), "running"),
    **dict.fromkeys(("pending", "queued", "waiting", "scheduled", "created", "submitted", "not_started"),
                    "pending"),
    **dict.fromkeys(("retrying", "retry", "retried", "retrying_after_error"), "retrying"),
    **dict.fromkeys(("skipped", "skip", "ignored", "not_run"), "skipped"),
    "unknown": "unknown",
}
_HTTP = re.compile(r"(?:http[ _/]?(?:status[ _])?)?([1-5])\d\d(?:\b.*)?", re.IGNORECASE)
_HTTP_STATUS = {"1": "running", "2": "success", "3": "success", "4": "failed", "5": "failed"}
_status_warned: set[str] = set()
_STATUS_WARN_MAX = 1000


def status_of(value: object, *, warn: bool = True) -> str:
    """The status a stored word means: one of :class:`ExecutionStatus`' values, ``unknown`` for a
    missing word or one memkit cannot read (warned about once per word). Never raises.

    Reads memkit's own words, the common spellings of agents (``ok``/``error``, ``succeeded``,
    ``failure``, ``exception``, ``timeout``, ``cancelled``, ``done``...), OTel and OpenInference status
    codes (``OK``, ``ERROR``, ``UNSET``: a span ended without an error), LangChain/LangSmith run
    statuses and HTTP-like codes (``200``, ``"HTTP 503"``: 2xx/3xx success, 4xx/5xx failed).
    """
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "success" if value else "failed"
    if isinstance(value, int):
        value = str(value)
    raw = getattr(value, "value", value)
    if not isinstance(raw, str):
        return "unknown"
    word = "_".join(raw.strip().lower().replace("-", " ").split())
    shown = _STATUS_WORDS.get(word)
    if shown is not None:
        return shown
    code = _HTTP.fullmatch(word.replace("_", " "))
    if code is not None:
        return _HTTP_STATUS[code[1]]
    if warn and raw not in _status_warned and len(_status_warned) < _STATUS_WARN_MAX:
        _status_warned.add(raw)
        warnings.warn(f"memkit: trace status {raw[:80]!r} is not a status memkit knows; the step reads as "
                      f"'unknown' (use success, failed, running, pending, retrying or skipped)", UserWarning,
                      stacklevel=3)
    return "unknown"


@dataclass
class ExecutionItem:
    """One executed step, as the seed framework records it."""

    step_name: str
    tool: str
    status: ExecutionStatus
    result: dict[str, Any] | None = None
    error: str | None = None
    timestamp: float = field(default_factory=lambda: datetime.now(UTC).timestamp())
    parameters: dict[str, Any] | None = None
    duration: float | None = None
    retry_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_name": self.step_name,
            "tool": self.tool,
            "status": ExecutionStatus(self.status).value,
            "result": self.result,
            "error": self.error,
            "timestamp": self.timestamp,
            "parameters": self.parameters,
            "duration": self.duration,
            "retry_count": self.retry_count,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutionItem:
        try:
            return cls(
                step_name=data["step_name"],
                tool=data["tool"],
                status=ExecutionStatus(data["status"]),
                result=data.get("result"),
                error=data.get("error"),
                timestamp=data.get("timestamp", datetime.now(UTC).timestamp()),
                parameters=data.get("parameters"),
                duration=data.get("duration"),
                retry_count=data.get("retry_count", 0),
            )
        except KeyError as exc:
            raise InvalidInputError(f"an execution item needs {exc.args[0]!r}") from None
        except ValueError as exc:
            raise InvalidInputError(f"bad execution item: {exc}") from None


_TRACEBACK = "Traceback (most recent call last):"

#: Payload keys memkit shows in columns of their own (with the timing keys of ``_timing``): every
#: other key an agent writes (``model``, ``tokens``, ``prompt``, ``cost``, its own ``traceback``...)
#: is shown as it is, as ``data.<key>`` (see :func:`agent_keys`).
READ_KEYS = frozenset(("step_name", "tool", "status", "step_index", "run_id", "workflow_id", "error",
                       "parameters", "result", "retry_count"))


def agent_keys(payload: Mapping[str, Any], read: frozenset[str] = READ_KEYS) -> dict[str, Any]:
    """The keys of a step's payload that no column of memkit's shows (``read`` and timing keys aside)."""
    from memkit._core._timing import TIMING_KEYS

    return {k: v for k, v in payload.items() if isinstance(k, str) and k not in read and k not in TIMING_KEYS}


def error_headline(text: str) -> str:
    """An error in one line: the message a framework wrote before the traceback it appended, else the
    traceback's last line (the exception), else the text itself."""
    at = text.find(_TRACEBACK)
    if at < 0:
        return text
    head = text[:at].strip()
    if head:
        return head
    lines = [line for line in text[at:].splitlines() if line.strip()]
    return lines[-1].strip() if len(lines) > 1 else text


def categorize_error(error: str | None) -> str:
    """The seed framework's failure categories, decided by words in the message, with two more kinds
    a researcher reads apart: ``rate_limit_error`` (HTTP 429, "rate limit", "too many requests") and
    ``network_error`` for every failure to reach a service (``ConnectionError``, timeouts, DNS, a reset
    connection, gateway statuses 502-504), not only messages saying "timeout" or "network"."""
    if not error:
        return "unknown"
    text = error_headline(error).lower()  # a traceback's frames name files, not what failed
    if _RATE_LIMIT.search(text):
        return "rate_limit_error"
    if _NETWORK.search(text):
        return "network_error"
    if "validation" in text or "schema" in text:
        return "validation_error"
    if "parameter" in text or "config" in text:
        return "parameter_error"
    if "success_criteria" in text:
        return "criteria_failure"
    return "execution_error"


class TraceWriteError(StorageError):
    """Storing one or more steps failed; ``failures`` pairs each item with its error."""

    def __init__(self, failures: list[tuple[ExecutionItem, BaseException]]) -> None:
        self.failures = failures
        first_item, first_exc = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        super().__init__(
            f"could not store the trace of step {first_item.step_name!r}{more}:"
            f" {type(first_exc).__name__}: {first_exc}"
        )
