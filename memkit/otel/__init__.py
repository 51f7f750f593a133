"""OpenTelemetry traces in and out: memkit runs as OTLP spans, and OTLP / OpenInference spans as runs.

Out (:func:`export_otlp`, :func:`send_otlp`): one span per step, following the OTel GenAI semantic
conventions (``gen_ai.operation.name="execute_tool"``, ``gen_ai.tool.name``), with the step's
parameters and result as ``input.value``/``output.value`` (what Phoenix shows) and a failed step as
span status ERROR with its error. Each recall the step made is a child span, the memory operation
``search_memory`` (``gen_ai.memory.query``, ``gen_ai.memory.search.mode``, ``gen_ai.memory.top_k``),
whose hits are retrieval documents (``retrieval.documents.<i>.document.id/score/content``).

In (:func:`import_otlp`, :class:`MemkitSpanProcessor`): each trace becomes one run (``run_id`` =
the trace id), each span a step: name, kind (OpenInference ``openinference.span.kind`` or
``gen_ai.operation.name``) as ``tool`` unless the span names its tool, start and duration, status
and error, ``input.value``/``output.value`` as parameters/result, and its place in the tree
(``span_id``, ``parent_span_id``, ``parent_step_index``). A retriever span's documents become a
recall of its step. A file is checked whole before anything is written, and written in one batch:
a bad file changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memkit._core._lazy import lazy_exports
from memkit.otel._fit import CUT_MARK

if TYPE_CHECKING:
    from memkit.otel._export import export_otlp, send_otlp, spans_to_otlp
    from memkit.otel._import import OtlpImport, import_otlp
    from memkit.otel._live import MemkitSpanProcessor

# Loaded when first asked for, as in memkit/__init__.py: importing memkit.otel costs nothing until used.
_LAZY = {
    "export_otlp": "memkit.otel._export", "send_otlp": "memkit.otel._export", "spans_to_otlp": "memkit.otel._export",
    "OtlpImport": "memkit.otel._import", "import_otlp": "memkit.otel._import",
    "MemkitSpanProcessor": "memkit.otel._live",
}

__all__ = [
    "CUT_MARK",
    "MemkitSpanProcessor",
    "OtlpImport",
    "export_otlp",
    "import_otlp",
    "send_otlp",
    "spans_to_otlp",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, globals(), submodules=True)
