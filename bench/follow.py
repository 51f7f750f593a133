"""Following a store while another process writes 100 steps a second: how late a step shows, and the CPU it costs.

    python bench/follow.py                          # SQLite, 10,000 steps held, 3 alternated rounds
    python bench/follow.py --held 100000
    python bench/follow.py --backend postgres       # a PostgreSQL server from memkit.testing

This process plays the notebook's kernel: a ``TraceReplay`` on the store. A second process writes runs
of 20 steps with ``add_trace``, one step every 10 ms, and prints when each write returned. A step is
*shown* when the panel's run list (the ``runs`` trait, what the browser is sent) first includes it.
Two ways, alternated round by round:

* ``follow``: ``TraceReplay(mem, follow=True)``, reading only the steps written since its last look;
* ``refresh``: the same panel calling ``refresh()`` (every step read again) on the same schedule.

Reported per way, medians over the rounds: the delay from write to shown (median, p95) and the
kernel process's CPU while following, in percent of one core (the writer's CPU is not counted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import memkit  # noqa: E402
from bench._util import load_average  # noqa: E402
from bench.frames import fill  # noqa: E402
from memkit.widgets import TraceReplay  # noqa: E402

INTERVAL = 0.5

WRITER = """
import json, sys, time
import memkit
url, seconds, rate, tag = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
mem = memkit.open(url)
start, n, out = time.monotonic(), 0, []
while time.monotonic() - start < seconds:
    mem.add_trace("bot", "live", {"step_name": f"{tag}-{n}", "tool": "fetch", "status": "success",
                  "step_index": n % 20, "run_id": f"{tag}-{n // 20}", "duration": 0.01, "timestamp": time.time(),
                  "usage": {"input_tokens": 10, "output_tokens": 2}}, user_id="bench")
    out.append([n, time.time()])
    n += 1
    time.sleep(max(0.0, start + n / rate - time.monotonic()))
mem.close()
print(json.dumps(out))
"""


def one_round(url: str, way: str, seconds: float, rate: float, tag: str) -> dict[str, Any]:
    mem = memkit.open(url)
    panel = TraceReplay(mem, recalls=False)
    shown: dict[int, float] = {}
    prefix = f"{tag}-"

    def seen(_change: Any) -> None:
        now = time.time()
        names = panel.steps_all["step_name"].iloc[-2000:]  # new steps are the last rows held
        for name in names[names.str.startswith(prefix, na=False)]:
            shown.setdefault(int(name[len(prefix):]), now)

    panel.observe(seen, names="runs")
    stop = threading.Event()
    refresher = None
    if way == "follow":
        panel.follow(INTERVAL)
    else:
        def again() -> None:
            while not stop.wait(INTERVAL):
                panel.refresh()
        refresher = threading.Thread(target=again, daemon=True)
        refresher.start()
    cpu0, wall0 = time.process_time(), time.monotonic()
    writer = subprocess.run([sys.executable, "-c", textwrap.dedent(WRITER), url, str(seconds), str(rate), tag],
                            capture_output=True, text=True, check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
    written = json.loads(writer.stdout)
    settle = time.monotonic() + 15  # the last writes shown (a loaded machine lags)
    while len(shown) < len(written) and time.monotonic() < settle:
        time.sleep(0.05)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    stop.set()
    panel.close()
    if refresher is not None:
        refresher.join()
    mem.close()
    delays = [shown[n] - t for n, t in written if n in shown]
    ordered = sorted(delays)
    return {"way": way, "steps": len(written), "missed": len(written) - len(delays),
            "p50_ms": statistics.median(ordered) * 1e3, "p95_ms": ordered[round(0.95 * (len(ordered) - 1))] * 1e3,
            "cpu_pct": 100 * cpu / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--held", type=int, default=10_000, help="steps in the store before the writer starts")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=100.0, help="steps written per second")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = None
    if args.backend == "sqlite":
        cache = ROOT / "bench" / ".cache"
        cache.mkdir(exist_ok=True)
        path = cache / f"follow_{args.held}.db"
        path.unlink(missing_ok=True)
        url = f"sqlite:///{path}?embedder=none"
    else:
        from memkit.testing import PostgresServer

        server = PostgresServer()
        server.start()
        url = server.url("follow") + "?embedder=none"
    try:
        with memkit.open(url) as mem:
            import asyncio

            asyncio.run(fill(mem.provider, args.held)) if args.held else None
        print(f"{args.backend}, {args.held:,} steps held, {args.rate:.0f} steps/s for {args.seconds:.0f} s a round, "
              f"looking every {INTERVAL} s; load average {load_average()}")
        results: dict[str, list[dict[str, Any]]] = {"follow": [], "refresh": []}
        for r in range(args.rounds):
            for way in (("follow", "refresh") if r % 2 == 0 else ("refresh", "follow")):
                result = one_round(url, way, args.seconds, args.rate, f"r{r}{way[0]}")
                results[way].append(result)
                print(f"  round {r + 1} {way:8} p50 {result['p50_ms']:7.0f} ms  p95 {result['p95_ms']:7.0f} ms  "
                      f"kernel CPU {result['cpu_pct']:5.1f} %  ({result['steps']} steps, {result['missed']} not shown)")
        print("medians over the rounds:")
        for way, rows in results.items():
            def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
                return statistics.median(row[key] for row in rows)
            print(f"  {way:8} write->shown p50 {med('p50_ms'):7.0f} ms  p95 {med('p95_ms'):7.0f} ms  "
                  f"kernel CPU {med('cpu_pct'):5.1f} % of a core")
        def ratio(key: str) -> float:
            f, s = (statistics.median(row[key] for row in results[w]) for w in ("follow", "refresh"))
            return s / f

        print(f"refresh / follow: delay p50 {ratio('p50_ms'):.1f}x, p95 {ratio('p95_ms'):.1f}x, kernel CPU "
              f"{ratio('cpu_pct'):.1f}x; load average after {load_average()}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
