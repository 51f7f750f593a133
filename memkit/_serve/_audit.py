"""Auditing runs without a notebook: ``memkit runs``, ``memkit show RUN``, ``memkit namespaces``.

Readable tables on a terminal, ``--json`` for scripts, exit code 1 when nothing matched (so
``memkit runs --status failed && ...`` reads naturally). Runs come from :mod:`._runs`, which
reads the store through :mod:`memkit._core._reads`: these commands never load pandas or numpy, and
on SQLite neither pydantic nor asyncio.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from memkit._core._errors import InvalidInputError, MemkitError
from memkit._core._items import error_headline
from memkit._display import format_duration, format_run_duration, format_time, printable
from memkit._serve._runs import RunDetail, RunUsage, filter_runs, open_reads, read_run, read_runs, runs_usage
from memkit._serve._terminal import cell, json_line, say, table, when

__all__ = ["NothingFound", "add_audit_commands"]


class NothingFound(MemkitError):
    """Nothing matched: exit code 1, so ``memkit runs --status failed && ...`` reads naturally."""


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def moment_arg(text: str | None, name: str) -> datetime | None:
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


def prices_arg(text: str | None) -> Any:
    """``--prices``: a JSON object (or a file holding one) of model -> [input, output] per million tokens."""
    if text is None:
        return None
    import json

    from memkit._core._usage import Prices

    raw = text
    if not text.lstrip().startswith("{"):
        try:
            with open(text, encoding="utf-8") as fh:
                raw = fh.read()
        except OSError as exc:
            raise InvalidInputError(f"--prices: cannot read {printable(text)!r}: {exc.strerror}") from None
    try:
        table = json.loads(raw)
    except ValueError as exc:
        raise InvalidInputError(f"--prices: not JSON ({exc})") from None
    if not isinstance(table, dict):
        raise InvalidInputError("--prices: a JSON object of model -> [input, output] price per million tokens")
    return Prices(table)


def _tokens(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.2f}" if value >= 1 else f"${value:.4g}"


def _usage_line(usage: RunUsage) -> str:
    """A run's usage in one line (empty when none of its steps recorded any)."""
    total = usage.total
    if total.tokens_total is None and total.cost is None:
        return ""
    return (f" · {_tokens(total.tokens_total)} tokens ({_tokens(total.tokens_in)} in / {_tokens(total.tokens_out)} "
            f"out) · {_cost(total.cost)}" + (f" · {', '.join(total.models)}" if total.models else ""))


def _marks_cell(marks: dict[str, int]) -> str:
    return ", ".join(f"{n} {label.replace('_', ' ')}" for label, n in sorted(marks.items())) or "-"


def cmd_runs(args: argparse.Namespace) -> int:
    """List runs, newest first, with the filters of runs_frame; exit 1 when none matches."""
    if args.limit < 1:
        raise InvalidInputError(f"--limit must be at least 1, got {args.limit}")
    since, until = moment_arg(args.since, "--since"), moment_arg(args.until, "--until")
    with open_reads(args.url) as reads:
        runs = read_runs(reads, user_id=args.user, agent_id=args.agent, workflow_id=args.workflow)
        runs = filter_runs(runs, status=args.status, since=since, until=until)
        shown = runs[:args.limit]
        usage = runs_usage(reads, shown, runs, prices_arg(args.prices)) if args.usage else None
    if args.json:
        for k, run in enumerate(shown):
            say(json_line(run.as_json() | ({} if usage is None else usage[k].as_json())))
    elif shown:
        rows = [[cell(r.key), when(r.started_at), r.status, cell(format_run_duration(r.duration_s, r.duration_kind)),
                 str(r.steps),
                 str(r.failed_steps), cell(r.recalls), _marks_cell(dict(r.marks)),
                 *([] if usage is None else [_tokens(usage[k].total.tokens_total), _cost(usage[k].total.cost)]),
                 cell(r.first_error and error_headline(r.first_error))]
                for k, r in enumerate(shown)]
        extra = [] if usage is None else ["tokens", "cost"]
        for line in table(["run", "started", "status", "duration", "steps", "failed", "recalls", "marks", *extra,
                           "first error"], rows, flex=8 + len(extra)):
            say(line)
        if len(runs) > len(shown):
            say(f"({len(shown)} of {len(runs)} runs; --limit shows more)", file=sys.stderr)
    if not runs:
        raise NothingFound("no run matches" if _filtered(args) else "no traces in this store")
    return 0


def _filtered(args: argparse.Namespace) -> bool:
    return any(getattr(args, k) is not None for k in ("status", "workflow", "agent", "user", "since", "until"))


def _kind(mark: dict[str, Any]) -> str:
    """:attr:`memkit.Mark.kind` of a mark as stores keep it."""
    return "step" if mark.get("step_id") is not None else "memory"


def _score(score: Any) -> float | None:
    """A stored score as the model reads it (a float)."""
    return None if score is None else float(score)


def _iso(text: str) -> str:
    """A stored time as Python writes it (``+00:00``, where pydantic writes ``Z``)."""
    return datetime.fromisoformat(text).isoformat()


def _mark_json(mark: dict[str, Any]) -> dict[str, Any]:
    """A mark as ``show --json`` prints it."""
    return {"mark_id": mark["id"], "kind": _kind(mark), "label": mark["label"], "note": mark.get("note", ""),
            "step_id": mark.get("step_id"), "step_index": mark.get("step_index"), "recall_id": mark.get("recall_id"),
            "memory_id": mark.get("memory_id"), "created_at": _iso(mark["created_at"])}


def _depths(steps: list[Any]) -> list[int]:
    """How deep each step is nested (its ``parent_step_index`` chain within the run): its name is
    indented by that much, as TraceReplay's tree does."""
    parent = {s.step_index: s.parent_step_index for s in steps if s.step_index is not None}
    depths = []
    for step in steps:
        depth, seen, at = 0, {step.step_index}, step.parent_step_index
        while at is not None and at in parent and at not in seen:
            depth, at = depth + 1, parent[at]
            seen.add(at)
        depths.append(depth)
    return depths


def cmd_show(args: argparse.Namespace) -> int:
    """One run: its steps, the full text of its errors, what each step recalled and how it was marked."""
    with open_reads(args.url) as reads:
        try:
            detail: RunDetail = read_run(reads, args.run, args.user, args.agent)
        except InvalidInputError as exc:
            if str(exc).startswith("no run"):
                raise NothingFound(f"no run {printable(args.run)!r} in this store; `memkit runs` lists them") from None
            raise
    run, steps, recalls = detail.run, detail.steps, detail.recalls
    usage = detail.priced(prices_arg(args.prices))
    step_marks = {m["step_id"]: m for m in detail.marks if _kind(m) == "step"}
    hit_marks = {(m.get("recall_id"), m.get("memory_id")): m for m in detail.marks if _kind(m) == "memory"}
    if args.json:
        say(json_line({
            **run.as_json(), **usage.as_json(),
            "steps": [s.as_json() | {"cost": u.cost, "usage_counted": c}
                      for s, u, c in zip(steps, usage.steps, usage.counted, strict=True)],
            "recalls": [{
                "recall_id": r["id"], "step_index": r.get("step_index"), "step_name": r.get("step_name"),
                "kind": r.get("kind", "search"), "query": r["query"], "mode": r["mode"], "limit": r["limit"],
                "namespace": [r["user_id"], r["agent_id"]], "created_at": _iso(r["created_at"]),
                "hits": [{"rank": rank, "memory_id": hit, "score": _score(score), "content": content,
                          "mark": (m := hit_marks.get((r["id"], hit))) and m["label"]}
                         for hit, rank, score, _, content in r.get("hits") or ()],
            } for r in recalls],
            "marks": [_mark_json(m) for m in detail.marks],
        }))
        return 0
    say(f"run {cell(run.key)}: {run.status} · {len(steps)} steps · "
        f"{cell(format_run_duration(run.duration_s, run.duration_kind))}"
        f" · started {when(run.started_at)} · {cell(run.user_id)} / {cell(run.agent_id)}{_usage_line(usage)}")
    untimed = sum(s.timing == "none" for s in steps)
    if untimed:
        say(f"{untimed} of {len(steps)} steps recorded no timing")
    say("")
    depth = _depths(steps)
    rows = [[cell(s.step_index), "  " * d + cell(s.step_name), cell(s.tool), cell(s.status),
             cell(format_duration(s.duration_s)), cell(s.timing), cell(s.retry_count or 0), cell(s.recalls),
             cell((m := step_marks.get(s.id)) and m["label"]), cell(u.model or "-"),
             _tokens(u.tokens_total) + ("" if c or u.tokens_total is None else " (in children)"), _cost(u.cost),
             cell(s.error and error_headline(s.error))]
            for s, d, u, c in zip(steps, depth, usage.steps, usage.counted, strict=True)]
    for line in table(["#", "step", "tool", "status", "duration", "timing", "retries", "recalls", "mark", "model",
                       "tokens", "cost", "error"], rows, flex=12):
        say(line)
    failed = [s for s in steps if s.error is not None]
    if failed:
        say("\nerrors:")
        for s in failed:
            say(f"  step {cell(s.step_index)} {cell(s.step_name)}: {printable(s.error)}")
    noted = [(s, step_marks[s.id]) for s in steps if s.id in step_marks]
    if noted:
        say("\nmarks:")
        for s, m in noted:
            note = f": {printable(m['note'])}" if m.get("note") else ""
            say(f"  step {cell(s.step_index)} {cell(s.step_name)}: {m['label']}{note}")
    if recalls:
        say("\nrecalls:")
        for r in recalls:
            hits = r.get("hits") or []
            say(f"  step {r.get('step_index')} {cell(r.get('step_name'))}: {r.get('kind', 'search')} "
                f"{printable(r['query'])!r} ({r['mode']}, {r['user_id']} / {r['agent_id']}) -> {len(hits)} memories"
                f"  [{r['id']}]")
            for hit, rank, score, _, content in hits:
                shown = f"{score:.3f}" if score is not None else "-"
                mark = hit_marks.get((r["id"], hit))
                verdict = "" if mark is None else f"  [{mark['label'].replace('_', ' ')}" + (
                    f": {cell(mark['note'], 60)}]" if mark.get("note") else "]")
                say(f"    {rank:>2}. {shown:>7}  {cell(content, 100)}{verdict}")
    return 0


def cmd_namespaces(args: argparse.Namespace) -> int:
    """Every (user_id, agent_id) with how many records (memories and trace steps) and when they were written."""
    with open_reads(args.url) as reads:
        spaces = reads.namespaces()
    if args.json:
        for ns in spaces:
            say(json_line({"user_id": ns["user_id"], "agent_id": ns["agent_id"], "count": ns["count"],
                           "first_at": ns["first_at"].isoformat() if ns["first_at"] else None,
                           "last_at": ns["last_at"].isoformat() if ns["last_at"] else None}))
    else:
        rows = [[cell(ns["user_id"]), cell(ns["agent_id"]), str(ns["count"]), cell(format_time(ns["first_at"]) or None),
                 cell(format_time(ns["last_at"]) or None)] for ns in spaces]
        for line in table(["user", "agent", "records", "first", "last"], rows):  # memories and trace steps
            say(line)
    if not spaces:
        raise NothingFound("no namespaces: this store is empty")
    return 0


_PRICES_HELP = ('cost of steps that recorded tokens and no cost: JSON (or a file of it) of model -> [input, output]'
                ' price per million tokens, e.g. \'{"gpt-4o": [2.5, 10]}\'')


def add_audit_commands(sub: Any) -> None:
    statuses = ["success", "failed", "running", "pending", "retrying", "skipped", "unknown"]
    runs = sub.add_parser(
        "runs", help="list workflow runs, newest first (filters like runs_frame)",
        description="List workflow runs, newest first. Exit code 0 when runs are listed, 1 when none\n"
        "matches, 2 for a bad argument. The marks column counts the steps a researcher marked good or bad.",
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
    runs.add_argument("--usage", action="store_true",
                      help="add each run's LLM tokens and cost (reads the steps of every run listed)")
    runs.add_argument("--prices", help=_PRICES_HELP)
    runs.set_defaults(func=cmd_runs)

    show = sub.add_parser(
        "show", help="one run: its steps, errors, what each step recalled and the marks on them",
        epilog="RUN is an id from `memkit runs` (user/agent/workflow/run_id), or a workflow/run_id, run_id or\n"
        "workflow_id naming one run.",
    )
    show.add_argument("run", metavar="RUN")
    show.add_argument("--user", help="look for RUN among this user_id's runs only")
    show.add_argument("--agent", help="look for RUN among this agent_id's runs only")
    show.add_argument("--json", action="store_true", help="the run as one JSON object")
    show.add_argument("--prices", help=_PRICES_HELP)
    show.set_defaults(func=cmd_show)

    spaces = sub.add_parser("namespaces", help="every (user_id, agent_id) with its number of memories")
    spaces.add_argument("--json", action="store_true", help="one JSON object per namespace")
    spaces.set_defaults(func=cmd_namespaces)
