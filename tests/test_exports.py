"""The public API is exactly what is meant: public modules and each one's ``__all__``.

A change here is a change to what users may import; update this list on purpose.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import memkit

PUBLIC: dict[str, set[str]] = {
    "memkit": {
        "BackendUnavailableError", "ConfigError", "ContextWindow", "ErrorCategory", "Evaluation", "Health",
        "HybridConfig", "InvalidInputError", "Limits", "Mark", "MemkitError", "Memory", "MemoryFilter",
        "MemoryItem", "MemoryProvider", "NamespaceInfo", "NewMemory", "NotFoundError", "Prices", "Recall",
        "RecalledMemory",
        "Stats", "StorageError", "SupportsAddMany", "SupportsAsOf", "SupportsClose", "SupportsExport",
        "SupportsGet", "SupportsHealth", "SupportsMarks", "SupportsNamespaces", "SupportsPaging",
        "SupportsRecalls", "SupportsSearchModes", "SupportsStats", "SupportsTraceColumns", "build_context",
        "evaluate", "export_jsonl", "get_memory_provider", "import_history", "import_jsonl", "open",
        "recall_scope",
    },
    "memkit.adapters": {
        "FalkorDBAdapter", "InMemoryAdapter", "Mem0Adapter", "MockMemoryAdapter", "Neo4jAdapter", "SQLiteAdapter",
    },
    "memkit.charts": {"VEGA_LITE_MIME", "Chart", "duration_chart", "evaluation_chart", "failure_heatmap",
                      "marks_chart", "success_rate_chart", "usage_chart"},
    "memkit.cli": {"main"},
    "memkit.embeddings": {
        "DEFAULT_EMBEDDER", "Embedder", "SentenceTransformerEmbedder", "StaticEmbedder", "get_embedder",
    },
    "memkit.frames": {
        "ANNOTATION_COLUMNS", "FOUND_COLUMNS", "LATENCY_COLUMNS", "RECALL_COLUMNS", "REPLAY_COLUMNS", "RUN_COLUMNS",
        "ReplayState", "TRACE_COLUMNS", "annotations_frame", "compare_runs", "failure_patterns", "filter_runs",
        "find_steps", "latency_stats", "memories_frame",
        "namespaces_frame", "recall_counts", "recalls_frame", "replay", "replay_recall", "run_steps", "runs_frame",
        "tool_stats", "traces_frame",
    },
    "memkit.graph": {
        "GraphEdge", "GraphNode", "MemoryGraph", "amemory_graph", "aneighbourhood", "memory_graph", "neighbourhood",
    },
    "memkit.langgraph": {"MemkitStore"},
    "memkit.otel": {
        "CUT_MARK", "MemkitSpanProcessor", "OtlpImport", "export_otlp", "import_otlp", "send_otlp",
        "spans_to_otlp",
    },
    "memkit.store": {
        "ENTRY_POINT_GROUP", "HANDLERS", "AddRecallsOp", "Capability", "CloseOp", "DeleteOp", "ExportOp", "GetOp",
        "ImportStepsOp", "ListOp", "MarksOp", "NamespacesOp", "Op", "PingOp", "PutMarksOp", "RecallsOp", "Record",
        "RemoveMarksOp", "ResetOp", "RunsOp", "SearchOp", "StatsOp", "Store", "TraceColumnsOp", "TracePayloadsOp",
        "ValuesOp", "WriteOp", "matches", "rank",
    },
    "memkit.testing": {
        "NEO4J_CURRENT", "NEO4J_LTS", "FalkorDBServer", "Neo4jServer", "PostgresServer", "ProviderConformance",
        "absence_report",
    },
    "memkit.tools": {
        "MemoryTools", "ProviderTools", "ToolCall", "ToolDispatcher", "import_tinydb", "register_pydantic_ai_tools",
    },
    "memkit.traces": {
        "ExecutionHistory", "ExecutionItem", "ExecutionStatus", "REDACTED", "Redactor", "Step", "TraceWriteError",
        "categorize_error", "get_trace_redactor", "set_trace_redactor",
    },
    "memkit.widgets": {
        "Dashboard", "GraphExplorer", "Grid", "NamespaceBrowser", "TraceReplay", "interactive_frames", "show",
    },
}


def test_the_public_modules_are_the_intended_ones() -> None:
    found = {
        m.name for m in pkgutil.walk_packages(memkit.__path__, "memkit.")
        if not any(part.startswith("_") for part in m.name.split(".")[1:])
    }
    assert found | {"memkit"} == set(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_module_exports_exactly_what_is_meant(name: str) -> None:
    module = importlib.import_module(name)
    assert set(module.__all__) == PUBLIC[name]
    assert len(module.__all__) == len(set(module.__all__))
    for member in module.__all__:
        assert getattr(module, member) is not None


@pytest.mark.parametrize("package", ["memkit", "memkit.otel", "memkit.traces"])
def test_lazy_packages_give_their_names_list_them_and_refuse_others(package: str) -> None:
    module = importlib.import_module(package)
    names = PUBLIC[package]
    assert names <= set(dir(module))
    for name in sorted(names):
        value = getattr(module, name)
        assert getattr(module, name) is value  # kept after the first look-up
        assert vars(module)[name] is value
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_a_submodule_not_imported_yet_loads_as_an_attribute() -> None:
    import subprocess
    import sys

    # A fresh process: here the test run has imported every submodule already.
    code = ("import sys, memkit, memkit.otel\n"
            "assert 'memkit.otel._export' not in sys.modules\n"
            "assert memkit.otel._export is sys.modules['memkit.otel._export']\n"
            "assert memkit.frames is sys.modules['memkit.frames']\n"
            "try:\n    memkit.otel._no_such_module\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "module 'memkit.otel' has no attribute '_no_such_module'"
