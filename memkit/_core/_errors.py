"""One error hierarchy for every adapter, each error tagged with a category a caller can act on."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "ErrorCategory",
    "InvalidInputError",
    "MemkitError",
    "NotFoundError",
    "StorageError",
]


class ErrorCategory(StrEnum):
    """What kind of failure a :class:`MemkitError` reports."""

    INVALID_INPUT = "invalid_input"
    NOT_FOUND = "not_found"
    STORAGE = "storage"
    CONFIG = "config"
    BACKEND_UNAVAILABLE = "backend_unavailable"


class MemkitError(Exception):
    """Base class of every error memkit raises on purpose.

    Catch this to handle any memkit failure; look at :attr:`category` to tell
    them apart without importing the subclasses.
    """

    category: ErrorCategory = ErrorCategory.STORAGE


class InvalidInputError(MemkitError, ValueError):
    """The caller passed something memkit refuses; nothing was written."""

    category = ErrorCategory.INVALID_INPUT


class NotFoundError(MemkitError, LookupError):
    """A named thing (workflow, record, file) does not exist."""

    category = ErrorCategory.NOT_FOUND


class StorageError(MemkitError):
    """The backend failed while reading or writing."""

    category = ErrorCategory.STORAGE


class ConfigError(MemkitError, ValueError):
    """The configuration (URL, provider name, options) is wrong."""

    category = ErrorCategory.CONFIG


class BackendUnavailableError(MemkitError, ConnectionError):
    """A backend cannot be reached, or its optional dependency is not installed."""

    category = ErrorCategory.BACKEND_UNAVAILABLE


def missing_extra(package: str, extra: str) -> BackendUnavailableError:
    """The error to raise when an optional dependency is not installed."""
    return BackendUnavailableError(
        f"{package} is not installed; install it with: pip install 'memkit[{extra}]'"
    )
