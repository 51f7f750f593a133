"""What every adapter does the same way, written once."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from memkit._models import Health

__all__ = ["timed_health"]


async def timed_health(
    provider: str, ping: Callable[[], Awaitable[str]], failures: tuple[type[BaseException], ...] = (Exception,)
) -> Health:
    """Run ``ping`` (which returns a detail line) and time it; a failure is reported, not raised."""
    start = time.perf_counter()
    try:
        detail, ok = await ping(), True
    except failures as exc:
        detail, ok = str(exc), False
    return Health(ok=ok, provider=provider, latency_ms=(time.perf_counter() - start) * 1e3, detail=detail)
