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
from memkit._evaluate import Evaluation, evaluate
from memkit._factory import get_memory_provider
from memkit._io import export_jsonl, import_history, import_jsonl
from memkit._marks import Mark
from memkit._models import Health, MemoryFilter, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._protocols import (
    MemoryProvider,
    SupportsAddMany,
    SupportsAsOf,
    SupportsClose,
    SupportsExport,
    SupportsGet,
    SupportsHealth,
    SupportsMarks,
    SupportsNamespaces,
    SupportsPaging,
    SupportsRecalls,
    SupportsSearchModes,
    SupportsStats,
    SupportsTraceColumns,
)
from memkit._recall import Recall, RecalledMemory, recall_scope
from memkit._retrieval import HybridConfig
from memkit._sync import Memory, open
from memkit._validate import Limits

__all__ = [
    "BackendUnavailableError",
    "ConfigError",
    "ContextWindow",
    "ErrorCategory",
    "Evaluation",
    "Health",
    "HybridConfig",
    "InvalidInputError",
    "Limits",
    "Mark",
    "MemkitError",
    "Memory",
    "MemoryFilter",
    "MemoryItem",
    "MemoryProvider",
    "NamespaceInfo",
    "NewMemory",
    "NotFoundError",
    "Recall",
    "RecalledMemory",
    "Stats",
    "StorageError",
    "SupportsAddMany",
    "SupportsAsOf",
    "SupportsClose",
    "SupportsExport",
    "SupportsGet",
    "SupportsHealth",
    "SupportsMarks",
    "SupportsNamespaces",
    "SupportsPaging",
    "SupportsRecalls",
    "SupportsSearchModes",
    "SupportsStats",
    "SupportsTraceColumns",
    "build_context",
    "evaluate",
    "export_jsonl",
    "get_memory_provider",
    "import_history",
    "import_jsonl",
    "open",
    "recall_scope",
]

__version__ = "0.1.0"
