"""memkit: long-term memory for AI agents, and the tools to look inside it."""

from memkit._context import ContextWindow, build_context
from memkit._errors import (
    BackendUnavailableError,
    ConfigError,
    ErrorCategory,
    InvalidInputError,
    MemkitError,
    NotFoundError,
    StorageError,
)
from memkit._factory import get_memory_provider
from memkit._io import export_jsonl, import_history, import_jsonl
from memkit._models import Health, MemoryFilter, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._protocols import (
    MemoryProvider,
    SupportsAddMany,
    SupportsClose,
    SupportsExport,
    SupportsGet,
    SupportsHealth,
    SupportsNamespaces,
    SupportsPaging,
    SupportsSearchModes,
    SupportsStats,
    SupportsTraceColumns,
)
from memkit._retrieval import HybridConfig
from memkit._sync import Memory, open
from memkit._validate import Limits

__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "ContextWindow",
    "ErrorCategory",
    "Health",
    "HybridConfig",
    "InvalidInputError",
    "Limits",
    "MemkitError",
    "Memory",
    "MemoryFilter",
    "MemoryItem",
    "MemoryProvider",
    "NamespaceInfo",
    "NewMemory",
    "NotFoundError",
    "Stats",
    "StorageError",
    "SupportsAddMany",
    "SupportsClose",
    "SupportsExport",
    "SupportsGet",
    "SupportsHealth",
    "SupportsNamespaces",
    "SupportsPaging",
    "SupportsSearchModes",
    "SupportsStats",
    "SupportsTraceColumns",
    "build_context",
    "export_jsonl",
    "get_memory_provider",
    "import_history",
    "import_jsonl",
    "open",
]

__version__ = "0.1.0"
