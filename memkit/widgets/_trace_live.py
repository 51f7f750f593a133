"""Following a store in :class:`~memkit.widgets.TraceReplay`: runs and steps another process writes appear
as they are written.

A thread looks at the store every ``interval`` seconds and reads only the steps written since its
last look (:class:`memkit.frames._live.StepFeed`); when there are some, the run list is summarised
again from the steps held (no store read) and the open run's timeline grows. The thread is the
panel's own: :meth:`LiveMixin.unfollow` and closing the panel stop it and wait for it to end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import traitlets as t

from memkit.frames._live import StepFeed
from memkit.frames._runs import _run_keys, _runs_from_steps, run_positions
from memkit.widgets._follow import Follower, checked_interval

if TYPE_CHECKING:
    from memkit._sync import Memory
    from memkit.frames._usage import PricesLike

__all__ = ["LIVE_FOR_S", "LiveMixin"]

LIVE_FOR_S = 10.0
"""A followed run that gained a step this recently is marked live in the run list."""


class LiveMixin(t.HasTraits):
    """``follow()``/``unfollow()``/``poll()`` for ``TraceReplay`` (which holds the steps and draws them)."""

    following = t.Bool(False).tag(sync=True)
    """Whether the panel is following the store (the browser shows it)."""
    live_runs = t.List(t.Unicode()).tag(sync=True)
    """The runs that gained a step in the last :data:`LIVE_FOR_S` seconds of following."""

    mem: Memory
    prices: PricesLike
    count_recalls: bool
    steps_all: pd.DataFrame
    all_runs: pd.DataFrame | None
    _positions: dict[str, Any]
    _all_rows: list[dict[str, Any]]
    _row_of: pd.Index
    options: dict[str, Any]
    run: str
    step: int
    detail: dict[str, Any]

    if TYPE_CHECKING:
        def say(self, message: str, kind: str = "info") -> None: ...
        def ensure_loaded(self) -> None: ...
        def _show_steps(self, frame: pd.DataFrame, runs: pd.DataFrame | None = None,
                        positions: dict[str, Any] | None = None, rows: list[dict[str, Any]] | None = None,
                        grown: pd.DataFrame | None = None) -> None: ...
        @staticmethod
        def row_cells(runs: pd.DataFrame) -> list[dict[str, Any]]: ...
        def _draw_run(self, run: str) -> None: ...
        def open_step(self, position: int) -> None: ...

    _follower: Follower | None = None
    _feed: StepFeed | None = None
    _grew: dict[str, float]
    # Held while the panel's state changes (a poll, a filter, opening a run or a step): the following
    # thread and the kernel's own never interleave. Reentrant: a change's observers change state too.
    _state_lock = threading.RLock()

    def follow(self, interval: float = 0.5) -> None:
        """Show new runs and steps as another process (or a span processor) writes them, looking every
        ``interval`` seconds; :meth:`unfollow` or closing the panel stops it."""
        seconds = checked_interval(interval)
        self.unfollow()
        self.ensure_loaded()
        self._grew = {}
        self._feed = StepFeed(self.mem, prices=self.prices, recalls=self.count_recalls)
        self.poll()  # the steps written since the panel read them
        self._follower = Follower(self, seconds, self.poll, self.say, lambda: setattr(self, "following", False))
        self.following = True

    def unfollow(self) -> None:
        """Stop following the store and wait for the following thread to end."""
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()
        self.following = False

    def poll(self) -> int:
        """Look at the store once: add the steps written since the last look and redraw; the number added."""
        if self._feed is None:
            self._feed = StepFeed(self.mem, prices=self.prices, recalls=self.count_recalls)
            self._grew = {}
        with self._state_lock:
            new = self._feed.read(self.steps_all.index)
            now = time.monotonic()
            if not new.empty:
                for run in set(_run_keys(new)):
                    self._grew[run] = now
                self._grow(new)
                if self.run and self.run in self._grew and self._grew[self.run] == now:
                    step, detail = self.step, self.detail
                    self._draw_run(self.run)
                    if detail and step >= 0:
                        self.detail = {}  # redrawn from the grown run
                        self.open_step(step)
            live = sorted(r for r, at in self._grew.items() if now - at <= LIVE_FOR_S)
            if live != self.live_runs:
                self.live_runs = live
            return len(new)

    def _locked(self, act: Callable[[], object]) -> None:
        with self._state_lock:
            act()

    def _grow(self, new: pd.DataFrame) -> None:
        """Add ``new`` steps to those held; only the runs they belong to are summarised again."""
        held, runs = self.steps_all, self.all_runs
        if runs is None or not len(held):
            self._show_steps(new)
            return
        frame = pd.concat([held, new])
        grown = list(dict.fromkeys(_run_keys(new)))
        # Where each grown run's steps are: its held rows, then its new ones after every held row.
        empty = np.empty(0, dtype=np.intp)
        new_positions = run_positions(new, pd.DataFrame(index=pd.Index(grown)))
        where = {run: np.concatenate([self._positions.get(run, empty), len(held) + new_positions[run]])
                 for run in grown}
        order = np.concatenate([where[run] for run in grown])
        summarised = _runs_from_steps(frame.iloc[order])
        kept = runs[~runs.index.isin(summarised.index)]
        rows = dict(zip(self._row_of, self._all_rows, strict=True))
        rows.update(zip(summarised.index, self.row_cells(summarised), strict=True))
        all_runs = pd.concat([kept, summarised]) if len(kept) else summarised
        positions = self._positions | {run: np.sort(where[run]) for run in summarised.index}
        self._show_steps(frame, all_runs, positions, [rows[run] for run in all_runs.index], summarised)

    def close(self) -> None:
        """Stop following, then close the panel's view."""
        self.unfollow()
        super().close()  # type: ignore[misc]
