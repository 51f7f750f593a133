"""Jupyter panels over any memkit store (needs ``pip install 'memkit[notebook]'``).

``NamespaceBrowser``, ``TraceReplay`` and ``GraphExplorer`` each take an open
store (``memkit.open(...)``); ``Dashboard`` shows the three in tabs. ``Grid`` (or ``show(df)``)
draws any DataFrame as a table sorted, filtered and paged in the browser;
``interactive_frames()`` draws every frame a notebook shows that way.
"""

from __future__ import annotations

from memkit._core._errors import missing_extra

try:
    import ipywidgets as _ipywidgets  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    raise missing_extra("ipywidgets", "notebook") from None

from memkit.widgets._dashboard import Dashboard
from memkit.widgets._graph import GraphExplorer
from memkit.widgets._namespaces import NamespaceBrowser
from memkit.widgets._table import Grid, interactive_frames, show
from memkit.widgets._traces import TraceReplay

__all__ = ["Dashboard", "GraphExplorer", "Grid", "NamespaceBrowser", "TraceReplay", "interactive_frames", "show"]
