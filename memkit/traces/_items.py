"""One step of a run: its status, what it did and how it failed (the seed framework's ``ExecutionItem``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from memkit._core._errors import InvalidInputError, StorageError

FAILURE_CATEGORIES = (
    "network_error", "validation_error", "parameter_error", "criteria_failure", "execution_error",
)


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


def categorize_error(error: str | None) -> str:
    """The seed framework's failure categories, decided by keywords in the message."""
    if not error:
        return "unknown"
    text = error.lower()
    if "timeout" in text or "network" in text:
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
