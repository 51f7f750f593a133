"""memkit: long-term memory for AI agents, and the tools to look inside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memkit._core._errors import (
    BackendUnavailableError,
    ConfigError,
    ErrorCategory,
    InvalidInputError,
    MemkitError,
    NotFoundError,
    StorageError,
)
from memkit._core._lazy import lazy_exports

if TYPE_CHECKING:
    from memkit._core._models import Health, MemoryFilter, MemoryItem, NamespaceInfo, NewMemory, Stats
    from memkit._core._port import (
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
    from memkit._core._recalls import Mark, Recall, RecalledMemory
    from memkit._core._usage import Prices
    from memkit._core._validate import Limits
    from memkit._evaluate import Evaluation, evaluate
    from memkit._io import export_jsonl, import_history, import_jsonl
    from memkit._recall._context import ContextWindow, build_context
    from memkit._recall._recording import recall_scope
    from memkit._retrieval._fusion import HybridConfig
    from memkit._sync import Memory, open
    from memkit.store._registry import get_memory_provider

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
    "Prices",
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

# Importing memkit stays cheap (the command line pays for every import on every call): each
# name below loads its module, and what that module needs (pydantic, numpy, pandas), on first use.
_LAZY: dict[str, str] = {
    "ContextWindow": "memkit._recall._context",
    "build_context": "memkit._recall._context",
    "Evaluation": "memkit._evaluate",
    "evaluate": "memkit._evaluate",
    "get_memory_provider": "memkit.store._registry",
    "export_jsonl": "memkit._io",
    "import_history": "memkit._io",
    "import_jsonl": "memkit._io",
    "Mark": "memkit._core._recalls",
    "Health": "memkit._core._models",
    "MemoryFilter": "memkit._core._models",
    "MemoryItem": "memkit._core._models",
    "NamespaceInfo": "memkit._core._models",
    "NewMemory": "memkit._core._models",
    "Stats": "memkit._core._models",
    "MemoryProvider": "memkit._core._port",
    "SupportsAddMany": "memkit._core._port",
    "SupportsAsOf": "memkit._core._port",
    "SupportsClose": "memkit._core._port",
    "SupportsExport": "memkit._core._port",
    "SupportsGet": "memkit._core._port",
    "SupportsHealth": "memkit._core._port",
    "SupportsMarks": "memkit._core._port",
    "SupportsNamespaces": "memkit._core._port",
    "SupportsPaging": "memkit._core._port",
    "SupportsRecalls": "memkit._core._port",
    "SupportsSearchModes": "memkit._core._port",
    "SupportsStats": "memkit._core._port",
    "SupportsTraceColumns": "memkit._core._port",
    "Recall": "memkit._core._recalls",
    "RecalledMemory": "memkit._core._recalls",
    "recall_scope": "memkit._recall._recording",
    "HybridConfig": "memkit._retrieval._fusion",
    "Memory": "memkit._sync",
    "open": "memkit._sync",
    "Limits": "memkit._core._validate",
    "Prices": "memkit._core._usage",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, globals(), submodules=True)
