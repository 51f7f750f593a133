"""The ``memkit`` command: ``demo``, ``stats``, ``search``, ``runs``, ``show``, ``namespaces``, ``graph``,
``export``, ``import``, ``mcp``.

Exit codes: 0 done, 1 nothing matched (no run, no such run: like ``grep``), 2 bad arguments
or a store error (the message says which argument and what was expected).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

import memkit
from memkit._display import format_duration, format_time, printable, shorten, summary
from memkit._errors import InvalidInputError, MemkitError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["main"]


def _say(text: object, file: TextIO | None = None) -> None:
    """Print one message with control characters escaped: stored text must never drive the terminal."""
    print(printable(text), file=file or sys.stdout)


def _json_line(value: object) -> str:
    """JSON with every non-ASCII character escaped, so it is valid JSON and inert in a terminal."""
    return json.dumps(value, ensure_ascii=True, default=str)


def _open(args: argparse.Namespace) -> memkit.Memory:
    return memkit.open(args.url)


def cmd_demo(args: argparse.Namespace) -> int:
    """Load the demo sample into the store (unless it already has memories), then show it."""
    from memkit._demo import load_demo

    with _open(args) as mem:
        before = mem.stats()
        if before.memories == 0 or args.force:
            if args.force:
                mem.reset()
            load_demo(mem, progress=not args.quiet)
            _say(f"Loaded the demo sample into {mem.provider!r}.")
        else:
            _say(f"{mem.provider!r} already holds {before.memories} memories; showing them (use --force to reload).")
        stats = mem.stats()
        _say(f"\n{stats.memories} memories ({stats.traces} trace steps) in {stats.namespaces} namespaces:")
        _say(f"  {'user':<8} {'agent':<16} {'count':>5}  last activity")
        for ns in mem.namespaces():
            last = ns.last_at.strftime("%Y-%m-%d %H:%M") if ns.last_at else "-"
            _say(f"  {ns.user_id:<8} {ns.agent_id:<16} {ns.count:>5}  {last}")
        notes = {"type": {"$ne": "trace"}}
        _say("\nsearch('BRCA2 BLAST hits', user_id='alice', agent_id='bioinformatics', filters=" + repr(notes) + "):")
        for hit in mem.search("BRCA2 BLAST hits", "alice", "bioinformatics", limit=3, filters=notes):
            _say(f"  {hit.score:6.2f}  {summary(hit, 110)}")
        _say("\nfailed trace steps: get_all(..., filters={'type': 'trace', 'status': 'failed'}):")
        failed = mem.get_all("alice", "bioinformatics", limit=3, filters={"type": "trace", "status": "failed"})
        for hit in failed:
            _say(f"  {hit.metadata.get('workflow_id')}: {summary(hit, 100)}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print counts and storage size (JSON)."""
    with _open(args) as mem:
        _say(json.dumps(mem.stats().model_dump(), indent=2, default=str, ensure_ascii=True))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search one namespace and print the hits (JSON lines with --json)."""
    filters = _json_arg(args.filters, "--filters") if args.filters else None
    with _open(args) as mem:
        options = {"mode": args.mode} if args.mode else {}
        hits = mem.search(args.query, args.user, args.agent, args.limit, filters, **options)
        if not hits and not args.json:
            _say(f"no matches in {args.user}/{args.agent}", file=sys.stderr)
        for hit in hits:
            if args.json:
                _say(_json_line(hit.model_dump(mode="json")))
            else:
                score = f"{hit.score:6.2f}" if hit.score is not None else "     -"
                _say(f"{score}  {hit.id}  {summary(hit, 110)}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write every record to a JSON Lines file."""
    with _open(args) as mem:
        count = memkit.export_jsonl(mem, args.path, user_id=args.user, agent_id=args.agent, progress=not args.quiet)
    _say(f"Exported {count} records to {args.path}.")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Load a JSON Lines export, or (with --history) a seed ExecutionHistory JSON file as traces."""
    with _open(args) as mem:
        if args.history:
            if not args.workflow or not args.agent:
                _say("memkit: error: --history needs --workflow and --agent", file=sys.stderr)
                return 2
            ids = memkit.import_history(
                mem, args.path, workflow_id=args.workflow, agent_id=args.agent,
                user_id=args.user or "system", run_id=args.run_id, progress=not args.quiet,
            )
            _say(f"Imported {len(ids)} trace steps of workflow {args.workflow!r} from {args.path}.")
        else:
            count = memkit.import_jsonl(mem, args.path, progress=not args.quiet)
            _say(f"Imported {count} records from {args.path}.")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    """Write a standalone, offline HTML graph of the store, a namespace or a workflow."""
    from memkit.graph import memory_graph

    if args.max_nodes < 1:
        raise memkit.InvalidInputError(f"--max-nodes must be at least 1, got {args.max_nodes}")
    scope = " / ".join(x for x in (args.user, args.agent) if x) or "the whole store"
    title = f"workflow {args.workflow} ({scope})" if args.workflow else f"namespace {scope}"
    with _open(args) as mem:
        graph = memory_graph(mem, user_id=args.user, agent_id=args.agent, workflow_id=args.workflow)
        if not graph.nodes:
            what = f"workflow {args.workflow!r}" if args.workflow else "it"
            raise memkit.NotFoundError(f"nothing to draw: {scope} has no memories in {what}")
        from memkit._graphview import page_html, select

        view = select(graph, args.max_nodes, args.group)
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(page_html(view, title))
    _say(f"wrote {args.html}: {title}, {view.message}, {len(view.edges)} edges")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store to MCP clients (stdio, or streamable HTTP on 127.0.0.1 with --http PORT)."""
    from memkit._mcp import Access, limits_from_flags, serve

    if args.http is not None and not 0 <= args.http <= 65535:
        raise memkit.InvalidInputError(f"--http must be a port between 0 and 65535, got {args.http}")
    access = Access.from_flags(args.user, args.agent, args.allow, args.read_only)
    limits = limits_from_flags(**{f.name: getattr(args, f.name) for f in dataclasses.fields(memkit.Limits)})
    serve(args.url, access, args.http, limits)
    return 0


# -- auditing runs without a notebook ------------------------------------------------------


class NothingFound(MemkitError):
    """Nothing matched: exit code 1, so ``memkit runs --status failed && ...`` reads naturally."""


def _json_arg(text: str, name: str) -> Any:
    """A JSON command-line argument, or an error naming it and showing where it broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{name} must be JSON, e.g. '{{\"gene\": \"TP53\"}}'; {printable(shorten(text, 60))!r} is not"
            f" ({exc.msg} at character {exc.pos})"
        ) from None


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def _moment_arg(text: str | None, name: str) -> datetime | None:
    """``--since``/``--until``: an ISO date or time (UTC unless it says), or an age like ``2h``, ``3d``."""
    if text is None:
        return None
    relative = _RELATIVE.match(text)
    if relative:
        return datetime.now(UTC) - timedelta(seconds=float(relative[1]) * _UNITS[relative[2]])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(
            f"{name} must be an ISO date or time (2026-11-20, 2026-11-20T14:00) or an age (90m, 2h, 3d, 1w),"
            f" got {printable(text)!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _plain(value: Any) -> Any:
    """A frame cell as a plain JSON value: ``None`` for any missing value, ISO text for a time."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    pd = sys.modules.get("pandas")  # only a command that read frames has pandas cells (and pays its import)
    if pd is not None and not isinstance(value, (list, dict, tuple, str)) and pd.isna(value):
        return None
    if isinstance(value, datetime):  # pandas' Timestamp too
        return value.isoformat()
    return value.item() if hasattr(value, "item") else value


def _cell(value: Any, width: int = 0) -> str:
    """One table cell: missing shows as ``-``, whitespace flattened, control characters escaped."""
    value = _plain(value)
    if value is None or value == "":
        return "-"
    text = printable(" ".join(str(value).split()))
    return shorten(text, width) if width else text


def _when(value: Any) -> str:
    value = _plain(value)
    return format_time(datetime.fromisoformat(value)) if value else "-"


def _table(headers: list[str], rows: list[list[str]], flex: int | None = None) -> list[str]:
    """Aligned columns; column ``flex`` (the free text) takes what the terminal has left."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    if flex is not None and rows:
        room = shutil.get_terminal_size((120, 24)).columns - sum(w + 2 for i, w in enumerate(widths) if i != flex)
        widths[flex] = max(min(widths[flex], room), 12)
        rows = [[shorten(c, widths[flex]) if i == flex else c for i, c in enumerate(r)] for r in rows]
    return ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in [headers, *rows]]


def _runs_table(args: argparse.Namespace, mem: memkit.Memory) -> pd.DataFrame:
    from memkit.frames import runs_frame

    return runs_frame(
        mem, status=args.status, workflow_id=args.workflow, agent_id=args.agent, user_id=args.user,
        since=_moment_arg(args.since, "--since"), until=_moment_arg(args.until, "--until"),
    )


_RUN_JSON = ("workflow_id", "run_id", "user_id", "agent_id", "status", "started_at", "ended_at", "duration_s", "steps",
             "failed_steps", "retries", "recalls", "first_error")
_STEP_JSON = ("step_index", "step_name", "tool", "status", "started_at", "duration_s", "timing", "retry_count",
              "recalls", "error")


def cmd_runs(args: argparse.Namespace) -> int:
    """List runs, newest first, with the filters of runs_frame; exit 1 when none matches."""
    if args.limit < 1:
        raise InvalidInputError(f"--limit must be at least 1, got {args.limit}")
    with _open(args) as mem:
        runs = _runs_table(args, mem)
    shown = runs.head(args.limit)
    if args.json:
        for key, row in shown.iterrows():
            _say(_json_line({"run": key, **{c: _plain(row[c]) for c in _RUN_JSON}}))
    elif len(shown):
        rows = [[_cell(key), _when(row["started_at"]), row["status"], _cell(format_duration(_plain(row["duration_s"]))),
                 str(row["steps"]), str(row["failed_steps"]), _cell(row["recalls"]), _cell(row["first_error"])]
                for key, row in shown.iterrows()]
        for line in _table(["run", "started", "status", "duration", "steps", "failed", "recalls", "first error"],
                           rows, flex=7):
            _say(line)
        if len(runs) > len(shown):
            _say(f"({len(shown)} of {len(runs)} runs; --limit shows more)", file=sys.stderr)
    if not len(runs):
        raise NothingFound("no run matches" if _filtered(args) else "no traces in this store")
    return 0


def _filtered(args: argparse.Namespace) -> bool:
    return any(getattr(args, k) is not None for k in ("status", "workflow", "agent", "user", "since", "until"))


def cmd_show(args: argparse.Namespace) -> int:
    """One run: its steps, the full text of its errors, and what each step recalled."""
    from memkit._protocols import SupportsRecalls
    from memkit.frames import run_steps, runs_frame

    with _open(args) as mem:
        runs = runs_frame(mem)
        try:
            from memkit.frames import _pick_run

            row = _pick_run(runs, args.run)
        except InvalidInputError as exc:
            if str(exc).startswith("no run"):
                raise NothingFound(f"no run {printable(args.run)!r} in this store; `memkit runs` lists them") from None
            raise
        steps = run_steps(mem, row)
        recalls = []
        if isinstance(row["workflow_id"], str) and isinstance(mem.provider, SupportsRecalls):
            recalls = [r for r in mem.recalls(workflow_id=row["workflow_id"], run_id=row["run_id"])
                       if r.run_id == row["run_id"]]
    name = str(row.name)
    if args.json:
        _say(_json_line({
            "run": name, **{c: _plain(row[c]) for c in _RUN_JSON},
            "steps": [{"step_id": step_id, **{c: _plain(s[c]) for c in _STEP_JSON if c in steps.columns}}
                      for step_id, s in steps.iterrows()],
            "recalls": [{
                "recall_id": r.id, "step_index": r.step_index, "step_name": r.step_name, "kind": r.kind,
                "query": r.query, "mode": r.mode, "limit": r.limit, "namespace": [r.user_id, r.agent_id],
                "created_at": r.created_at.isoformat(),
                "hits": [{"rank": h.rank, "memory_id": h.id, "score": h.score, "content": h.content} for h in r.hits],
            } for r in recalls],
        }))
        return 0
    took = _cell(format_duration(_plain(row["duration_s"])))
    _say(f"run {_cell(name)}: {row['status']} · {len(steps)} steps · {took}"
         f" · started {_when(row['started_at'])} · {_cell(row['user_id'])} / {_cell(row['agent_id'])}")
    untimed = int((steps["timing"] == "none").sum())
    if untimed:
        _say(f"{untimed} of {len(steps)} steps recorded no timing")
    _say("")
    rows = [[_cell(s["step_index"]), _cell(s["step_name"]), _cell(s["tool"]), _cell(s["status"]),
             _cell(format_duration(_plain(s["duration_s"]))), _cell(s["timing"]),
             _cell(s["recalls"] if "recalls" in steps.columns else None), _cell(s["error"])]
            for _, s in steps.iterrows()]
    for line in _table(["#", "step", "tool", "status", "duration", "timing", "recalls", "error"], rows, flex=7):
        _say(line)
    failed = steps[steps["error"].notna()]
    if len(failed):
        _say("\nerrors:")
        for _, s in failed.iterrows():
            _say(f"  step {_cell(s['step_index'])} {_cell(s['step_name'])}: {printable(s['error'])}")
    if recalls:
        _say("\nrecalls:")
        for r in recalls:
            _say(f"  step {r.step_index} {_cell(r.step_name)}: {r.kind} {printable(r.query)!r} ({r.mode}, "
                 f"{r.user_id} / {r.agent_id}) -> {len(r.hits)} memories  [{r.id}]")
            for h in r.hits:
                score = f"{h.score:.3f}" if h.score is not None else "-"
                _say(f"    {h.rank:>2}. {score:>7}  {_cell(h.content, 100)}")
    return 0


def cmd_namespaces(args: argparse.Namespace) -> int:
    """Every (user_id, agent_id) with how many memories and when they were written."""
    with _open(args) as mem:
        spaces = mem.namespaces()
    if args.json:
        for ns in spaces:
            _say(_json_line({"user_id": ns.user_id, "agent_id": ns.agent_id, "count": ns.count,
                             "first_at": ns.first_at.isoformat() if ns.first_at else None,
                             "last_at": ns.last_at.isoformat() if ns.last_at else None}))
    else:
        rows = [[_cell(ns.user_id), _cell(ns.agent_id), str(ns.count), _cell(format_time(ns.first_at) or None),
                 _cell(format_time(ns.last_at) or None)] for ns in spaces]
        for line in _table(["user", "agent", "memories", "first", "last"], rows):
            _say(line)
    if not spaces:
        raise NothingFound("no namespaces: this store is empty")
    return 0


def _add_audit_commands(sub: Any) -> None:
    statuses = ["success", "failed", "running", "pending", "retrying", "skipped", "unknown"]
    runs = sub.add_parser(
        "runs", help="list workflow runs, newest first (filters like runs_frame)",
        description="List workflow runs, newest first. Exit code 0 when runs are listed, 1 when none\n"
        "matches, 2 for a bad argument.",
        epilog="example: memkit runs --status failed --since 2d\n"
        "         memkit runs --workflow variant-calling-alice-1 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runs.add_argument("--status", choices=statuses, help="only runs with this status")
    runs.add_argument("--workflow", help="only runs of this workflow_id")
    runs.add_argument("--agent", help="only runs of this agent_id")
    runs.add_argument("--user", help="only runs of this user_id")
    runs.add_argument("--since", help="started at or after: ISO date/time (UTC) or an age such as 90m, 2h, 3d, 1w")
    runs.add_argument("--until", help="started at or before (same forms as --since)")
    runs.add_argument("--limit", type=int, default=50, help="show at most this many runs (default: 50)")
    runs.add_argument("--json", action="store_true", help="one JSON object per run")
    runs.set_defaults(func=cmd_runs)

    show = sub.add_parser(
        "show", help="one run: its steps, errors and what each step recalled",
        epilog="RUN is an id from `memkit runs` (workflow/run_id), a run_id or a workflow_id naming one run.",
    )
    show.add_argument("run", metavar="RUN")
    show.add_argument("--json", action="store_true", help="the run as one JSON object")
    show.set_defaults(func=cmd_show)

    spaces = sub.add_parser("namespaces", help="every (user_id, agent_id) with its number of memories")
    spaces.add_argument("--json", action="store_true", help="one JSON object per namespace")
    spaces.set_defaults(func=cmd_namespaces)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memkit", description="Long-term memory for AI agents: load, inspect and search a store."
    )
    parser.add_argument(
        "--url", default=None,
        help="store to open (default: $MEMKIT_URL or sqlite:///data/memory.db); e.g. memory://, sqlite:///x.db",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="load the demo research-agent sample and show a summary and a search")
    demo.add_argument("--force", action="store_true", help="wipe the store and reload the sample")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(func=cmd_demo)

    stats = sub.add_parser("stats", help="print how much the store holds")
    stats.set_defaults(func=cmd_stats)

    search = sub.add_parser("search", help="search one namespace")
    search.add_argument("query")
    search.add_argument("--user", required=True, help="user_id of the namespace")
    search.add_argument("--agent", required=True, help="agent_id of the namespace")
    search.add_argument("--limit", type=int, default=5)
    search.add_argument("--filters", help='metadata filter as JSON, e.g. \'{"gene": "TP53"}\'')
    search.add_argument("--mode", choices=["keyword", "semantic", "hybrid"], help="retrieval mode")
    search.add_argument("--json", action="store_true", help="one JSON object per hit")
    search.set_defaults(func=cmd_search)

    _add_audit_commands(sub)

    export = sub.add_parser("export", help="write every record to a JSON Lines file")
    export.add_argument("path")
    export.add_argument("--user", help="only this user_id")
    export.add_argument("--agent", help="only this agent_id")
    export.add_argument("--quiet", action="store_true", help="no progress bar")
    export.set_defaults(func=cmd_export)

    load = sub.add_parser("import", help="load a JSON Lines export (all or nothing)")
    load.add_argument("path")
    load.add_argument("--history", action="store_true",
                      help="the file is an ExecutionHistory.save_to_file JSON: store its items as traces")
    load.add_argument("--workflow", help="workflow_id of the imported history")
    load.add_argument("--agent", help="agent_id of the imported history")
    load.add_argument("--user", help="user_id of the imported history (default: system)")
    load.add_argument("--run-id", help="run_id label of the imported history")
    load.add_argument("--quiet", action="store_true", help="no progress bar")
    load.set_defaults(func=cmd_import)

    graph = sub.add_parser(
        "graph", help="write an offline HTML graph of the store, a namespace or a workflow",
        description="Draw the store, one namespace (memories and the genes, tools and topics they mention)\n"
        "or one workflow (its runs left to right, step by step, with their tools and memories) as a\n"
        "standalone HTML file that loads nothing from the network; open it in any browser.\n"
        "Colour and shape = node type, failed steps in vermillion; search, legend toggles and a\n"
        "properties panel work in the file. Over --max-nodes it keeps memories sampled over time\n"
        "and the entities they mention most, and says what it left out.",
        epilog="example: memkit graph --html store.html\n"
        "         memkit graph --user alice --agent bioinformatics --html alice.html\n"
        "         memkit graph --workflow variant-calling-alice-1 --html run.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    graph.add_argument("--html", required=True, metavar="OUT.html", help="file to write")
    graph.add_argument("--user", help="only this user_id (default: every user)")
    graph.add_argument("--agent", help="only this agent_id (default: every agent)")
    graph.add_argument("--workflow", help="draw this workflow's runs instead of memories")
    graph.add_argument("--max-nodes", type=int, default=300,
                       help="keep at most this many nodes, a representative part (default: 300)")
    graph.add_argument("--group", choices=["entity", "auto"], default=None,
                       help="draw memories grouped under the entities that mention them, each with its count"
                            " (a click opens a group in the file); auto: only over --max-nodes")
    graph.set_defaults(func=cmd_graph)

    mcp = sub.add_parser(
        "mcp", help="serve the store to MCP clients (Claude Desktop, IDEs, pydantic-ai, ...)",
        description="Serve the store as a Model Context Protocol server: tools remember, recall, forget,\n"
        "list_recent, record_step (and the key-value tools write, read, list, delete, pattern_search\n"
        "on a SQLite store), resources for recent memories and workflow steps. Over stdio by\n"
        "default; --http PORT serves streamable HTTP on 127.0.0.1. A client reaches only the\n"
        "namespace of --user/--agent, or those listed with --allow (then a tool argument picks one).",
        epilog="example: memkit --url sqlite:///data/memory.db mcp --user alice --agent bioinformatics\n"
        "         memkit mcp --allow alice/bioinformatics --allow bob/planner --read-only",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mcp.add_argument("--url", default=argparse.SUPPRESS, help="store to open (same as memkit --url)")
    mcp.add_argument("--user", help="user_id of the namespace the server is bound to")
    mcp.add_argument("--agent", help="agent_id of the namespace the server is bound to")
    mcp.add_argument("--allow", action="append", metavar="USER/AGENT",
                     help="a namespace clients may choose with the tools' namespace argument (repeatable;"
                     " with --user/--agent, theirs is the default)")
    mcp.add_argument("--read-only", action="store_true", help="serve only the reading tools; refuse writes")
    mcp.add_argument("--http", type=int, metavar="PORT",
                     help="serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio (0: any free port)")
    for limit in dataclasses.fields(memkit.Limits):
        mcp.add_argument(f"--{limit.name.replace('_', '-')}", type=int, metavar="N",
                         help=f"refuse a tool call past this bound (memkit.Limits; default {limit.default:_})")
    mcp.set_defaults(func=cmd_mcp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memkit`` console script."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except NothingFound as exc:
        _say(f"memkit: {exc}", file=sys.stderr)
        return 1
    except (MemkitError, json.JSONDecodeError, OSError) as exc:
        _say(f"memkit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
