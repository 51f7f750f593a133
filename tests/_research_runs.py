"""A store written the way research agents write their traces, and what each run really was.

:func:`write_runs` writes 300 runs (plus three whose ids contain ``/``) through ``add_trace`` and
returns, per run, what the generator itself decided: when its steps started and how long they took,
its outcome, failures, retries, first error and recalls. The tests compare every view with these
figures, so nothing here calls memkit to work out an expected value.

What the agents do, as agents do it: eight timing spellings and none at all (a third of the runs
record no start time), one row per attempt (``retrying`` rows, then the outcome), their own status
words (``ok``/``error``, OTel's ``OK``/``ERROR``/``UNSET``, HTTP codes, ``succeeded``, ``exception``,
``timeout``, ``cancelled``, ``skipped``...), their own payload keys (``traceback``, ``model``,
``tokens``, ``prompt``, ``cost``), full Python tracebacks as errors, nested steps without start
times, and two users sharing workflow and run ids.

LLM usage as agents and instrumentations spell it (:func:`_usage_keys`): OTel GenAI (current and older
names, flat and nested), OpenInference, OpenAI's response ``usage``, Anthropic's, a step's own
``tokens``/``cost``, and none; a nested run's parent chain reports its children's tokens again. Each
run's expected totals count a step's usage only when no step beneath it reports usage, priced with
:data:`PRICES` where the agent recorded no cost.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import memkit
from memkit._core._recalls import Recall, RecalledMemory
from memkit._sync import run_sync

__all__ = ["BACKENDS", "ExpectedRun", "store_url", "write_runs"]

# The stores the run-number and usage tests write a research store into: both embedded ones, a
# server SQL store and a graph store.
BACKENDS = ["sqlite", "memory", "postgres", "falkordb"]

T0 = datetime(2026, 9, 1, 6, tzinfo=UTC)
WORKFLOWS = ("literature-review", "variant-calling", "protein-fold")
# (word written, what it means) per vocabulary
VOCABULARIES: dict[str, dict[str, Any]] = {
    "memkit": {"success": "success", "failed": "failed", "running": "running"},
    "ok/error": {"success": "ok", "failed": "error", "running": "in_progress"},
    "otel": {"success": "OK", "failed": "ERROR", "running": "running"},
    "otel-unset": {"success": "UNSET", "failed": "STATUS_CODE_ERROR", "running": "running"},
    "http": {"success": "200", "failed": "503", "running": "102"},
    "langchain": {"success": "succeeded", "failed": "exception", "running": "pending"},
    "words": {"success": "completed", "failed": "timeout", "running": "started"},
    "cancel": {"success": "done", "failed": "cancelled", "running": "queued"},
}
SKIPPED_WORDS = ("skipped", "skip")
#: Price per million input / output tokens (``llama-3-70b`` unlisted: its steps have no cost).
PRICES = {"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6), "claude-3-5-sonnet": (3.0, 15.0)}
USAGE_SPELLINGS = ("otel-genai", "otel-genai-old", "openinference", "openai", "anthropic", "nested-genai", "none")
_MODELS = ("gpt-4o", "claude-3-5-sonnet-20241022", "llama-3-70b", "gpt-4o-2024-08-06")
ERRORS = (
    "ConnectionError: HTTPSConnectionPool(host='eutils.ncbi.nlm.nih.gov', port=443): Max retries exceeded",
    "TimeoutError: PDB fetch timed out after 30 s",
    "HTTP 429 Too Many Requests: rate limit reached for requests",
    "ValueError: invalid parameter 'evalue'",
)


def _traceback(last: str) -> str:
    return ("Traceback (most recent call last):\n  File \"agent.py\", line 88, in run_step\n"
            "    result = tool(**parameters)\n  File \"tools/blast.py\", line 12, in blast\n"
            f"    raise RuntimeError(message)\n{last}\n")


@dataclass
class ExpectedRun:
    """What the generator wrote for one run."""

    user_id: str
    agent_id: str
    workflow_id: str
    run_id: str
    timing: str
    vocabulary: str
    status: str
    steps: int
    failed_steps: int
    retries: int
    recalls: int
    #: Epoch seconds of the first recorded start (``None``: no step recorded one).
    start: float | None
    #: Seconds (``None``: unknown) and what they are: ``wall``, ``sum of steps`` or ``unknown``.
    duration: float | None
    duration_kind: str
    first_error: str | None = None
    #: The last line of ``first_error`` (the exception), when it is a traceback.
    error_headline: str | None = None
    #: (start or None, status shown) of each row: what a success-rate chart counts.
    rows: list[tuple[float | None, str]] = field(default_factory=list)
    #: The agent's own payload keys on its first row.
    extra: dict[str, Any] = field(default_factory=dict)
    nested: bool = False
    #: LLM usage rolled up without double counting (``None``: no step recorded it).
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_total: int | None = None
    cost: float | None = None
    models: set[str] = field(default_factory=set)
    usage_spelling: str = "none"

    def count_usage(self, model: str | None, tokens_in: int | None, tokens_out: int | None,
                    cost: float | None) -> None:
        """One counted step's usage, priced with :data:`PRICES` when it recorded no cost."""
        if cost is None and model is not None:
            price = next((PRICES[m] for m in sorted(PRICES, key=len, reverse=True) if model.startswith(m)), None)
            if price is not None:
                cost = ((tokens_in or 0) * price[0] + (tokens_out or 0) * price[1]) / 1e6
        for name, value in (("tokens_in", tokens_in), ("tokens_out", tokens_out),
                            ("tokens_total", (tokens_in or 0) + (tokens_out or 0)), ("cost", cost)):
            if value is not None:
                setattr(self, name, (getattr(self, name) or 0) + value)
    #: The tool of its failed step, and the message of its error (what the failure is about).
    failed_tool: str | None = None

    @property
    def ids(self) -> tuple[str, str, str, str]:
        return (self.user_id, self.agent_id, self.workflow_id, self.run_id)


_TIMINGS = ("iso", "epoch", "timestamp", "epoch-ms", "start-only", "mixed", "duration_ms", "elapsed", "latency",
            "none")


def _timing_keys(style: str, start: float, seconds: float, position: int) -> dict[str, Any]:
    """A step's timing as an agent of ``style`` spells it (``start``: epoch seconds)."""
    if style == "iso":
        return {"started_at": datetime.fromtimestamp(start, UTC).isoformat(),
                "ended_at": datetime.fromtimestamp(start + seconds, UTC).isoformat()}
    if style == "epoch":
        return {"start_time": start, "duration_ms": seconds * 1000}
    if style == "timestamp":
        return {"timestamp": start, "duration": seconds}
    if style == "epoch-ms":
        return {"started_at": start * 1000, "elapsed_ms": seconds * 1000}
    if style == "start-only":
        return {"started_at": datetime.fromtimestamp(start, UTC).isoformat()}
    if style == "mixed":  # the first step says when it started, the others only how long they took
        return {"started_at": start, "duration_s": seconds} if position == 0 else {"duration_s": seconds}
    if style == "duration_ms":
        return {"duration_ms": seconds * 1000}
    if style == "elapsed":
        return {"elapsed": seconds}
    if style == "latency":
        return {"latency_ms": seconds * 1000}
    return {}


def _usage_keys(spelling: str, model: str, tokens_in: int, tokens_out: int) -> dict[str, Any]:
    """A step's usage as one agent or instrumentation writes it (``result`` merged into the step's own)."""
    if spelling == "otel-genai":
        return {"gen_ai.usage.input_tokens": tokens_in, "gen_ai.usage.output_tokens": tokens_out,
                "gen_ai.request.model": model}
    if spelling == "otel-genai-old":
        return {"gen_ai.usage.prompt_tokens": tokens_in, "gen_ai.usage.completion_tokens": tokens_out,
                "gen_ai.response.model": model}
    if spelling == "openinference":
        return {"llm.token_count.prompt": tokens_in, "llm.token_count.completion": tokens_out,
                "llm.token_count.total": tokens_in + tokens_out, "llm.model_name": model}
    if spelling == "openai":
        return {"result": {"model": model, "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                                     "total_tokens": tokens_in + tokens_out,
                                                     "prompt_tokens_details": {"cached_tokens": 7}}}}
    if spelling == "anthropic":
        return {"model": model, "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out,
                                          "cache_creation_input_tokens": 11}}
    if spelling == "nested-genai":
        return {"gen_ai": {"usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                           "request": {"model": "ignored-request-model"}, "response": {"model": model}}}
    return {}


def _run_plan(rng: random.Random, number: int) -> dict[str, Any]:
    return {
        "timing": _TIMINGS[number % len(_TIMINGS)],
        "vocabulary": list(VOCABULARIES)[number % len(VOCABULARIES)],
        "steps": rng.randint(2, 6),
        "outcome": rng.choices(["success", "failed", "running"], [0.62, 0.33, 0.05])[0],
        "long": number % 9 == 4,  # steps of minutes: runs of over an hour
        "per_attempt": number % 4 == 1 and number % 11 != 5,  # a nested run's parent runs once
        "traceback": number % 3 == 0,
        "nested": number % 11 == 5,
    }


def _write_run(mem: memkit.Memory, rng: random.Random, ids: tuple[str, str, str, str], number: int,
               recalls: list[Recall], begin: float) -> ExpectedRun:
    user, agent, workflow, run_id = ids
    plan = _run_plan(rng, number)
    words = VOCABULARIES[plan["vocabulary"]]
    style = plan["timing"]
    clock = begin
    starts: list[float] = []
    ends: list[float] = []
    durations: list[float] = []
    expected = ExpectedRun(user, agent, workflow, run_id, style, plan["vocabulary"], "success", 0, 0, 0, 0,
                           None, None, "unknown", nested=plan["nested"])
    spelling = expected.usage_spelling = USAGE_SPELLINGS[number % len(USAGE_SPELLINGS)]
    llm_model, llm_in, llm_out = _MODELS[number % len(_MODELS)], 200 + 3 * number, 50 + number % 17
    llm_used = spelling != "none" and plan["steps"] > 3  # the step at index 3 is the LLM call
    last = plan["steps"] - 1
    statuses: list[str] = []
    position = 0
    for index in range(plan["steps"]):
        step_name, tool = f"step-{index}", ("pubmed", "blast", "pdb", "llm")[index % 4]
        final = "success"
        if index == last and plan["outcome"] != "success":
            final = plan["outcome"]
        attempts = rng.randint(1, 2) if plan["per_attempt"] and index == 1 else 0
        retry_field = rng.randint(1, 3) if not attempts and index == 0 and number % 5 == 2 else 0
        skipped = final == "success" and index == 2 and number % 7 == 3
        for attempt in range(attempts + 1):
            is_attempt = attempt < attempts
            seconds = round(rng.uniform(60, 1500) if plan["long"] else rng.uniform(0.2, 40), 3)
            if plan["nested"] and index >= 1:  # step 1 holds steps 2 and later: it lasts as long as they do
                seconds = round(rng.uniform(200, 250) if index == 1 else rng.uniform(0.2, 40), 3)
            status_word: Any
            if is_attempt:
                status_word, shown = "retrying", "retrying"
            elif skipped:
                status_word, shown = rng.choice(SKIPPED_WORDS), "skipped"
            else:
                status_word, shown = words[final], final
            data: dict[str, Any] = {"step_name": step_name, "tool": tool, "step_index": index, "run_id": run_id,
                                    "status": status_word, "parameters": {"query": f"q{number}-{index}"},
                                    "result": {"hits": index}}
            running = shown == "running"
            if not running:
                data.update(_timing_keys(style, clock, seconds, position))
            elif style not in ("duration_ms", "elapsed", "latency", "none", "mixed"):
                data.update({"started_at": clock})  # a step still running: its start, no duration yet
            if is_attempt:
                data["error"] = ERRORS[0]
                data["retry_count"] = attempt
            elif retry_field:
                data["retry_count"] = retry_field
            if shown == "failed":
                message = ERRORS[number % len(ERRORS)]
                error = _traceback(message) if plan["traceback"] else message
                data["error"] = error
                data["traceback"] = _traceback(message)
                expected.first_error = error
                expected.error_headline = message
                expected.failed_tool = tool
            if position == 0:
                extra = {"model": "gpt-4o-mini", "tokens": {"prompt": 120 + number, "completion": 40},
                         "prompt": f"Find papers on TP53 ({number})", "cost": round(0.001 * (number + 1), 6)}
                data.update(extra)
                expected.extra = extra
                expected.models.add("gpt-4o-mini")
                expected.count_usage("gpt-4o-mini", 120 + number, 40, extra["cost"])
            if plan["nested"] and index >= 2:
                data["parent_step_index"] = 1
            if index == 3 and llm_used:
                usage = _usage_keys(spelling, llm_model, llm_in, llm_out)
                data.update({**usage, "result": {**data["result"], **usage.get("result", {})}})
                expected.models.add(llm_model)
                expected.count_usage(llm_model, llm_in, llm_out, None)
            if index == 1 and plan["nested"] and not is_attempt:
                if llm_used:  # the chain reports its LLM child's tokens again: not counted twice
                    data["usage"] = {"input_tokens": llm_in, "output_tokens": llm_out}
                else:  # nothing beneath it reports usage: its own tokens count
                    data["tokens"] = 77
                    expected.tokens_total = (expected.tokens_total or 0) + 77
            mem.add_trace(agent, workflow, data, user_id=user)
            row_start = clock if ("started_at" in data or "start_time" in data or "timestamp" in data) else None
            expected.rows.append((row_start, shown))
            if row_start is not None:
                starts.append(row_start)
                has_duration = not running and style != "start-only"
                ends.append(row_start + (seconds if has_duration else 0.0))
            if not running and style not in ("start-only", "none"):
                durations.append(seconds)
            position += 1
            clock += seconds + 0.5
        statuses.append(shown)
        expected.retries += max(attempts, retry_field)
        expected.failed_steps += shown == "failed"
        for _ in range(rng.randrange(3) if index % 2 == 1 else 0):  # index 1: the step with attempts
            recalls.append(Recall(
                id=uuid.uuid4().hex, created_at=datetime.fromtimestamp(clock, UTC), user_id=user, agent_id=agent,
                query="TP53", mode="keyword", limit=5, workflow_id=workflow, run_id=run_id, step_index=index,
                step_name=step_name, attempt=1, trace_user_id=user, trace_agent_id=agent,
                hits=[RecalledMemory(id=f"note-{user}", rank=1, score=1.0, content=f"{user}'s note on TP53")],
            ))
            expected.recalls += 1
    expected.steps = len(statuses)
    expected.status = ("failed" if "failed" in statuses else "running" if "running" in statuses else "success")
    if starts and len(starts) == len(expected.rows):
        expected.start, expected.duration, expected.duration_kind = min(starts), max(ends) - min(starts), "wall"
    elif durations:
        expected.start = min(starts) if starts else None
        expected.duration, expected.duration_kind = sum(durations), "sum of steps"
    else:
        expected.start = min(starts) if starts else None
    return expected


def store_url(backend: str, request: Any, tmp_path_factory: Any, name: str) -> str:
    """A fresh, keyword-only store of ``backend`` (one of :data:`BACKENDS`) for a test module."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp(name) / f'{name}.db'}?embedder=none"
    if backend == "memory":
        return "memory://"
    if backend == "postgres":
        return str(request.getfixturevalue("postgres_server").url(f"{name}_{uuid.uuid4().hex[:8]}")) + "?embedder=none"
    return str(request.getfixturevalue("falkordb_server").url(f"{name}-{uuid.uuid4().hex[:8]}"))


def write_runs(mem: memkit.Memory, runs: int = 300, seed: int = 42) -> list[ExpectedRun]:
    """Write ``runs`` runs (alice's and bob's, sharing workflow and run ids) and three runs whose ids
    contain ``/``; return what each run was, in the order written."""
    rng = random.Random(seed)
    recalls: list[Recall] = []
    expected: list[ExpectedRun] = []
    for number in range(runs):
        user = ("alice", "bob")[number % 2]
        workflow = WORKFLOWS[(number // 2) % len(WORKFLOWS)]
        run_id = f"li-{number // 2:04d}"  # alice's and bob's runs share workflow and run ids
        begin = (T0 + timedelta(days=number % 20, minutes=7 * number)).timestamp()
        expected.append(_write_run(mem, rng, (user, "bio", workflow, run_id), number, recalls, begin))
    for number, ids in enumerate((("lab/alice", "bio", "wfc", "rc"), ("lab", "alice/bio", "wfc", "rc"),
                                  ("mallory", "m", "lab/alice/bio/wfc", "rc")), start=runs):
        begin = (T0 + timedelta(days=21, hours=number - runs)).timestamp()
        expected.append(_write_run(mem, rng, ids, number, recalls, begin))
    run_sync(mem.provider.add_recalls(recalls))  # type: ignore[attr-defined]
    return expected
