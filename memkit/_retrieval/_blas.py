"""One BLAS thread for a namespace's bulk vector products (its moments, axes and projections).

numpy's OpenBLAS starts a thread per core and splits every product between them. For the
products a store does when it indexes a whole namespace (a 384 x 384 float64 moment summed over
every vector, its eigenvectors, the projections), measured on a shared 2-core machine at load 5:
two threads took 1.3 s of CPU and 1.2 s of wall time for the moments of 100k vectors, one
thread 0.43 s and 0.44 s; a waiting OpenBLAS thread spins, and on a busy machine the two
threads wait for each other. So these products run on one thread; searches are unaffected.

Without OpenBLAS (another BLAS, or no way to find it) this changes nothing. The thread count
is process-wide: while any thread is inside :func:`one_thread`, every product runs on one.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

__all__ = ["one_thread"]

_NAMES = ("scipy_openblas{}64_", "scipy_openblas{}", "openblas{}64_", "openblas{}")
_LOCK = threading.Lock()
_inside = 0
_before = 0


@lru_cache(maxsize=1)
def _controls() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """OpenBLAS's get/set thread-count functions, from the library this process loaded (Linux)."""
    import numpy  # noqa: F401  (loads the BLAS numpy links against)

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _NAMES:
            get = getattr(library, name.format("_get_num_threads"), None)
            put = getattr(library, name.format("_set_num_threads"), None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block's BLAS products on one thread (nested and concurrent uses are counted)."""
    global _inside, _before
    controls = _controls()
    if controls is None:
        yield
        return
    get, put = controls
    with _LOCK:
        if not _inside:
            _before = get()
            if _before != 1:
                put(1)
        _inside += 1
    try:
        yield
    finally:
        with _LOCK:
            _inside -= 1
            if not _inside and _before != 1:
                put(_before)
