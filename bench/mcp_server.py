"""What MCP adds to a call: ``memkit mcp`` over stdio against the same store called in-process.

Run ``python bench/mcp_server.py`` (needs ``memkit[mcp]``). A SQLite store with ``--size`` notes in
one namespace; ``--calls`` calls of each tool, timed one by one (p50 / p95 / max), plus the time
from starting the subprocess to a finished MCP handshake.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client, StdioServerParameters

import memkit
from bench._util import dump, percentiles, print_table, time_each
from bench.run import make_texts


async def main(size: int, calls: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db?embedder=none"
        with memkit.open(url) as mem:
            mem.add_many({"content": text, "metadata": meta, "user_id": "alice", "agent_id": "bio"}
                         for text, meta in make_texts(size, seed=7))
        provider = memkit.get_memory_provider(url)
        direct = {
            "remember": lambda: provider.add("BLAST of TP53 returned 12 homologs", "alice", "bio"),
            "recall": lambda: provider.search("TP53 homologs", "alice", "bio", 10),
            "list_recent": lambda: provider.get_all("alice", "bio", 10),
        }
        rows: list[dict[str, Any]] = []
        for name, call in direct.items():
            rows.append({"what": f"in-process {name}", **percentiles(await time_each([call] * calls))})
        await provider.aclose()  # type: ignore[attr-defined]

        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memkit", "--url", url, "mcp", "--user", "alice", "--agent", "bio"]
        )
        started = time.perf_counter()
        async with Client(params) as client:
            rows.append({"what": "mcp start to handshake", **percentiles([time.perf_counter() - started])})
            over_mcp = {
                "remember": lambda: client.call_tool("remember", {"content": "BLAST of TP53 returned 12 homologs"}),
                "recall": lambda: client.call_tool("recall", {"query": "TP53 homologs", "limit": 10}),
                "list_recent": lambda: client.call_tool("list_recent", {"limit": 10}),
            }
            for name, call in over_mcp.items():
                rows.append({"what": f"mcp stdio {name}", **percentiles(await time_each([call] * calls))})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()
    results = asyncio.run(main(args.size, args.calls))
    print_table(results, ["what", "p50_ms", "p95_ms", "max_ms", "n"])
    text = dump({"size": args.size, "calls": args.calls, "results": results})
    print(text)
    if args.out:
        Path(args.out).write_text(text)
