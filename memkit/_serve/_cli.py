"""The ``memkit`` command: its parser, ``main``, and the commands over a whole store (``demo``, ``stats``,
``search``, ``graph``, ``export``, ``import``, ``mcp``); the audit commands (``runs``, ``show``,
``namespaces``) are in :mod:`._audit`.

Exit codes: 0 done, 1 nothing matched (no run, no such run: like ``grep``), 2 bad arguments
or a store error (the message says which argument and what was expected).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import memkit
from memkit._core._errors import InvalidInputError, MemkitError
from memkit._display import printable, shorten, summary
from memkit._serve._audit import NothingFound, add_audit_commands
from memkit._serve._terminal import json_line, say

__all__ = ["build_parser", "main"]


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
            say(f"Loaded the demo sample into {mem.provider!r}.")
        else:
            say(f"{mem.provider!r} already holds {before.memories} memories; showing them (use --force to reload).")
        stats = mem.stats()
        say(f"\n{stats.memories - stats.traces} memories and {stats.traces} trace steps in {stats.namespaces}"
            " namespaces:")
        say(f"  {'user':<8} {'agent':<16} {'count':>5}  last activity")
        for ns in mem.namespaces():
            last = ns.last_at.strftime("%Y-%m-%d %H:%M") if ns.last_at else "-"
            say(f"  {ns.user_id:<8} {ns.agent_id:<16} {ns.count:>5}  {last}")
        notes = {"type": {"$ne": "trace"}}
        say("\nsearch('BRCA2 BLAST hits', user_id='alice', agent_id='bioinformatics', filters=" + repr(notes) + "):")
        for hit in mem.search("BRCA2 BLAST hits", "alice", "bioinformatics", limit=3, filters=notes):
            say(f"  {hit.score:6.2f}  {summary(hit, 110)}")
        say("\nfailed trace steps: get_all(..., filters={'type': 'trace', 'status': 'failed'}):")
        failed = mem.get_all("alice", "bioinformatics", limit=3, filters={"type": "trace", "status": "failed"})
        for hit in failed:
            say(f"  {hit.metadata.get('workflow_id')}: {summary(hit, 100)}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print counts and storage size (JSON)."""
    from memkit._serve._runs import open_reads

    with open_reads(args.url) as reads:
        say(json.dumps(reads.stats(), indent=2, default=str, ensure_ascii=True))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search one namespace and print the hits (JSON lines with --json)."""
    from memkit._serve._runs import open_reads, port_reads

    filters = _json_arg(args.filters, "--filters") if args.filters else None
    search = (args.query, args.user, args.agent, args.limit, filters, args.mode)
    with open_reads(args.url) as reads:
        hits = reads.search(*search)
        if hits is not None:
            _print_hits(hits, args)  # before closing: closing may save a snapshot the search found stale
    if hits is None:  # a search the store runs itself (another mode, vectors, an argument it refuses)
        with port_reads(args.url) as port:
            _print_hits(port.search(*search), args)
    return 0


def _print_hits(hits: list[dict[str, Any]], args: argparse.Namespace) -> None:
    if not hits and not args.json:
        say(f"no matches in {args.user}/{args.agent}", file=sys.stderr)
    for hit in hits:
        if args.json:
            # As pydantic writes a MemoryItem: a UTC time ends in "Z"; the rest is the plain JSON the store validated.
            when = hit["created_at"] and hit["created_at"].isoformat()
            say(json_line({**hit, "created_at": when[:-6] + "Z" if when and when.endswith("+00:00") else when}))
        else:
            score = f"{hit['score']:6.2f}" if hit["score"] is not None else "     -"
            say(f"{score}  {hit['id']}  {summary(hit, 110)}")
    sys.stdout.flush()


def cmd_export(args: argparse.Namespace) -> int:
    """Write every record to a JSON Lines file."""
    with _open(args) as mem:
        count = memkit.export_jsonl(mem, args.path, user_id=args.user, agent_id=args.agent, progress=not args.quiet)
    say(f"Exported {count} records to {args.path}.")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Load a JSON Lines export, or (with --history) a seed ExecutionHistory JSON file as traces, or
    (with --tinydb) the seed's TinyDB key-value file into the store's key-value table."""
    with _open(args) as mem:
        if args.tinydb:
            from memkit._serve._kv import import_tinydb, kv_path  # only this command needs the key-value table

            path = kv_path(mem.provider)
            if path is None:
                say("memkit: error: --tinydb imports into a SQLite store file (--url sqlite:///...)", file=sys.stderr)
                return 2
            count = import_tinydb(args.path, path)
            say(f"Imported {count} key-value records from {args.path} into {path}"
                " (MemoryTools reads them, each under its run_id).")
        elif args.history:
            if not args.workflow or not args.agent:
                say("memkit: error: --history needs --workflow and --agent", file=sys.stderr)
                return 2
            ids = memkit.import_history(
                mem, args.path, workflow_id=args.workflow, agent_id=args.agent,
                user_id=args.user or "system", run_id=args.run_id, progress=not args.quiet,
            )
            say(f"Imported {len(ids)} trace steps of workflow {args.workflow!r} from {args.path}.")
        else:
            count = memkit.import_jsonl(mem, args.path, progress=not args.quiet)
            say(f"Imported {count} records from {args.path}.")
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
        from memkit.graph._page import page_html
        from memkit.graph._view import select

        view = select(graph, args.max_nodes, args.group)
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(page_html(view, title))
    say(f"wrote {args.html}: {title}, {view.message}, {len(view.edges)} edges")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store to MCP clients (stdio, or streamable HTTP on 127.0.0.1 with --http PORT)."""
    from memkit._serve._mcp import Access, limits_from_flags, serve

    if args.http is not None and not 0 <= args.http <= 65535:
        raise memkit.InvalidInputError(f"--http must be a port between 0 and 65535, got {args.http}")
    access = Access.from_flags(args.user, args.agent, args.allow, args.read_only)
    limits = limits_from_flags(**{f.name: getattr(args, f.name) for f in dataclasses.fields(memkit.Limits)})
    serve(args.url, access, args.http, limits)
    return 0


def _json_arg(text: str, name: str) -> Any:
    """A JSON command-line argument, or an error naming it and showing where it broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{name} must be JSON, e.g. '{{\"gene\": \"TP53\"}}'; {printable(shorten(text, 60))!r} is not"
            f" ({exc.msg} at character {exc.pos})"
        ) from None


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

    add_audit_commands(sub)

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
    load.add_argument("--tinydb", action="store_true",
                      help="the file is the seed's TinyDB JSON key-value file: store its records for MemoryTools")
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


#: Commands that read a little and exit: what they load they use once.
_READS = frozenset(("stats", "search", "runs", "show", "namespaces"))


def _one_shot() -> None:
    """Settings for a command that reads a little and exits (a variable the user set wins).

    OpenBLAS starts a thread per core when numpy loads, which costs a one-shot search about 45 ms of
    CPU that a one-shot search's few vector products do not win back; pydantic looks for
    validation plugins in every installed distribution's entry points the first time a model is
    built (30-40 ms in a 200-package environment) for a process that validates a handful of results.
    A server (``memkit mcp``) and the commands that embed or draw a whole store keep both."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memkit`` console script."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    if argv is None and args.command in _READS:
        _one_shot()
    try:
        return func(args)
    except BrokenPipeError:
        # The reader left (``memkit show RUN | head``): what it read is all it wanted. Python would
        # report the pipe again when it flushes stdout at exit, so stdout is pointed at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except NothingFound as exc:
        say(f"memkit: {exc}", file=sys.stderr)
        return 1
    except (MemkitError, json.JSONDecodeError, OSError) as exc:
        say(f"memkit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
