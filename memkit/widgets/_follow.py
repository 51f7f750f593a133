"""The thread a followed panel looks at its store from, every ``interval`` seconds until stopped.

A panel owns its :class:`Follower`: stopping it (or closing the panel) waits for the thread to end,
so a closed panel leaves no thread behind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from memkit._core._errors import InvalidInputError, MemkitError

__all__ = ["Follower", "checked_interval"]


def checked_interval(interval: object) -> float:
    """``interval`` as seconds, or an :class:`~memkit.InvalidInputError` before anything starts."""
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0.05 <= interval <= 3600:
        raise InvalidInputError(f"interval must be a number of seconds from 0.05 to 3600, got {interval!r}")
    return float(interval)


class Follower:
    """Calls ``poll`` every ``interval`` seconds on a thread of its own until :meth:`stop`.

    A memkit error (a store briefly unavailable) is said through ``say`` and tried again at the next
    look; any other error is said, ``stopped`` is called and the thread ends (nobody else would see it).
    """

    def __init__(self, owner: object, interval: float, poll: Callable[[], object],
                 say: Callable[[str, str], None], stopped: Callable[[], None]) -> None:
        self._poll, self._say, self._stopped = poll, say, stopped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,),
                                        name=f"memkit-follow-{id(owner):x}", daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self._poll()
            except MemkitError as exc:
                self._say(f"following: {type(exc).__name__}: {exc}", "error")
            except Exception as exc:
                self._say(f"stopped following: {type(exc).__name__}: {exc}", "error")
                self._stopped()
                return

    def stop(self) -> None:
        """Stop looking and wait for the thread to end (unless called from it)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
