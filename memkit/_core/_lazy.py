"""A package's exported names, each imported from its module when first looked up (PEP 562).

``import memkit`` (and ``memkit.otel``, ``memkit.traces``) stays cheap for the one-shot commands
and the OTel import's child process, which use few of the names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], names: Sequence[str], namespace: dict[str, Any], *,
    submodules: bool = False,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: a name in ``homes`` is imported from its module
    there and kept in ``namespace`` (the package's globals), so later look-ups skip the function.
    ``submodules``: any other name loads the package's submodule of that name, as plain attribute
    access on a package did before it was imported."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
            namespace[name] = value
            return value
        if submodules and not name.startswith("__"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
