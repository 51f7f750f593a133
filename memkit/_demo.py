"""A seeded, realistic sample of research-agent memories and execution traces.

Everything is derived from ``seed``: ids, texts, metadata and timestamps, so the
demo store (and the notebooks that read it) are identical on every machine.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memkit._core._records import trace_record

if TYPE_CHECKING:
    from memkit._core._port import MemoryProvider
    from memkit._core._recalls import Recall
    from memkit._sync import Memory

__all__ = ["DEMO_AGENTS", "DEMO_USERS", "REVIEW_RUN", "demo_items", "load_demo"]

DEMO_USERS = ("alice", "bob", "carol")
DEMO_AGENTS = ("planner", "bioinformatics", "executor")
_BASE = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
_NS = uuid.UUID("6f1c1f0e-7d1e-4d7a-9c59-0c1f3c0de5a1")

_GENES = ["TP53", "BRCA1", "BRCA2", "EGFR", "KRAS", "PIK3CA", "PTEN", "MYC", "CDKN2A", "ATM"]
_SPECIES = ["Homo sapiens", "Mus musculus", "Danio rerio", "Gallus gallus", "Xenopus laevis"]
_PATHWAYS = ["DNA repair", "apoptosis", "cell cycle", "MAPK signalling", "PI3K-AKT signalling"]
_TOOLS = ["blast", "bwa", "gatk", "vep", "samtools", "muscle", "iqtree", "entrez", "fastqc"]


def _planner(rng: random.Random) -> tuple[str, dict[str, Any]]:
    gene = rng.choice(_GENES)
    goal = rng.choice([
        f"characterise {gene} variants in the tumour cohort",
        f"find {gene} orthologues across vertebrates",
        f"check whether {gene} loss changes {rng.choice(_PATHWAYS)}",
    ])
    actions = ["fetch reads", "align", "call variants", "annotate", "run BLAST", "build tree", "write report"]
    steps = rng.sample(actions, 3)
    text = f"Plan to {goal}: {steps[0]}, then {steps[1]}, then {steps[2]}."
    return text, {"topic": "planning", "gene": gene, "priority": rng.choice(["high", "normal", "low"])}


def _bio(rng: random.Random) -> tuple[str, dict[str, Any]]:
    gene = rng.choice(_GENES)
    kind = rng.randrange(4)
    if kind == 0:
        hits, ident = rng.randint(3, 180), round(rng.uniform(62, 99.5), 1)
        text = f"BLAST of {gene} against nr returned {hits} hits; best hit {rng.choice(_SPECIES)} at {ident}% identity."
        return text, {"topic": "homology", "gene": gene, "tool": "blast", "hits": hits}
    if kind == 1:
        pos, vaf = rng.randint(12, 980), round(rng.uniform(0.05, 0.6), 2)
        aa = rng.choice("ACDEFGHIKLMNPQRSTVWY")
        text = f"Variant {gene} p.R{pos}{aa} found in sample S{rng.randint(1, 40)} with VAF {vaf}; likely somatic."
        return text, {"topic": "variants", "gene": gene, "tool": "gatk", "vaf": vaf}
    if kind == 2:
        pathway = rng.choice(_PATHWAYS)
        p = f"{rng.uniform(1, 9):.1f}e-{rng.randint(3, 12)}"
        text = f"GO enrichment of the {gene} co-expression module points to {pathway} (adjusted p = {p})."
        return text, {"topic": "enrichment", "gene": gene, "pathway": pathway}
    cov = rng.randint(18, 120)
    text = f"Sample S{rng.randint(1, 40)} aligned with bwa: mean coverage {cov}x over the {gene} exons."
    return text, {"topic": "alignment", "gene": gene, "tool": "bwa", "coverage": cov}


def _executor(rng: random.Random) -> tuple[str, dict[str, Any]]:
    tool = rng.choice(_TOOLS)
    if rng.random() < 0.25:
        error = rng.choice(["network timeout contacting NCBI", "out of memory", "invalid FASTA header"])
        return f"Job for {tool} failed: {error}; queued a retry.", {"topic": "jobs", "tool": tool, "status": "failed"}
    secs = rng.randint(4, 3600)
    return f"Job for {tool} finished in {secs} s on node c{rng.randint(1, 16):02d}.", {
        "topic": "jobs", "tool": tool, "status": "success", "seconds": secs,
    }


_MAKERS = {"planner": _planner, "bioinformatics": _bio, "executor": _executor}

_WORKFLOWS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("variant-calling", "bioinformatics", [("fetch_reads", "sra-tools"), ("quality_check", "fastqc"),
                                           ("align_reads", "bwa"), ("call_variants", "gatk"),
                                           ("annotate_variants", "vep")]),
    ("homology-search", "bioinformatics", [("fetch_sequence", "entrez"), ("run_blast", "blast"),
                                           ("align_hits", "muscle"), ("build_tree", "iqtree")]),
    ("cohort-report", "executor", [("collect_results", "samtools"), ("summarise", "pandas"),
                                   ("render_report", "quarto")]),
]
_FAILURES = [
    ("network", "ConnectionError: network timeout contacting eutils.ncbi.nlm.nih.gov"),
    ("validation", "ValidationError: invalid FASTA header on line 1"),
    ("parameter", "ValueError: parameter evalue must be positive"),
    ("execution", "RuntimeError: process exited with code 137 (out of memory)"),
]


def _trace_items(rng: random.Random, user: str, clock: datetime) -> tuple[list[dict[str, Any]], datetime]:
    items: list[dict[str, Any]] = []
    for run in range(2):
        for name, agent, steps in _WORKFLOWS:
            gene = rng.choice(_GENES)
            workflow_id = f"{name}-{user}-{run + 1}"
            for index, (step, tool) in enumerate(steps):
                clock += timedelta(seconds=rng.randint(20, 400))
                retries = 0
                status, error = "success", None
                roll = rng.random()
                if roll < 0.12:
                    status, error = "failed", rng.choice(_FAILURES)[1]
                elif roll < 0.25:
                    retries = rng.randint(1, 2)
                duration = round(rng.uniform(0.4, 95.0), 2)
                params: dict[str, Any] = {"gene": gene, "threads": rng.choice([2, 4, 8])}
                if tool == "blast":
                    params.update(database="nr", evalue=1e-5)
                result: dict[str, Any] = {} if status == "failed" else {"records": rng.randint(1, 5000)}
                data = {
                    "step_name": step, "tool": tool, "status": status, "step_index": index,
                    "run_id": f"run-{user}-{run + 1}", "parameters": params, "result": result,
                    "error": error, "duration": duration, "retry_count": retries,
                    "timestamp": clock.timestamp(),
                }
                record = trace_record(agent, workflow_id, data, user)
                items.append(_item(record.content, user, agent, record.metadata, clock))
                if status == "failed":
                    break
    return items, clock


def _item(content: str, user: str, agent: str, metadata: dict[str, Any], when: datetime) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid5(_NS, f"{user}/{agent}/{when.isoformat()}/{content}")),
        "content": content, "user_id": user, "agent_id": agent, "metadata": metadata, "created_at": when,
    }


def demo_items(seed: int = 7, per_namespace: int = 30) -> list[dict[str, Any]]:
    """The demo store as ``add_many`` rows: memories for every (user, agent) and workflow traces."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for user in DEMO_USERS:
        clock = _BASE + timedelta(hours=DEMO_USERS.index(user))
        for agent in DEMO_AGENTS:
            for _ in range(per_namespace):
                clock += timedelta(minutes=rng.randint(3, 240))
                text, meta = _MAKERS[agent](rng)
                items.append(_item(text, user, agent, meta, clock))
        traces, _ = _trace_items(rng, user, clock)
        items.extend(traces)
    return items


def run_items(
    user: str, agent: str, workflow_id: str, run_id: str | None, steps: int, *, start: datetime | None = None,
    seed: int = 0, fail_every: int = 0,
) -> list[dict[str, Any]]:
    """One synthetic run of ``steps`` steps as ``add_many`` rows (benchmarks and browser checks).

    Tools cycle through the demo's; every ``fail_every``-th step fails (0: none); steps
    follow one another with small idle gaps.
    """
    rng = random.Random(seed)
    clock = start or _BASE
    tools = [tool for _, _, flow in _WORKFLOWS for _, tool in flow]
    items: list[dict[str, Any]] = []
    for index in range(steps):
        tool = tools[index % len(tools)]
        failed = bool(fail_every) and (index + 1) % fail_every == 0
        duration = round(rng.uniform(0.2, 20.0), 2)
        data: dict[str, Any] = {
            "step_name": f"{tool}_{index}", "tool": tool, "status": "failed" if failed else "success",
            "step_index": index, "parameters": {"threads": rng.choice([2, 4, 8]), "gene": rng.choice(_GENES)},
            "result": {} if failed else {"records": rng.randint(1, 5000)},
            "error": rng.choice(_FAILURES)[1] if failed else None, "duration": duration,
            "retry_count": 1 if rng.random() < 0.05 else 0, "timestamp": clock.timestamp(),
        }
        if run_id is not None:
            data["run_id"] = run_id
        record = trace_record(agent, workflow_id, data, user)
        items.append(_item(record.content, user, agent, record.metadata, clock))
        clock += timedelta(seconds=duration + rng.uniform(0, 3))
    return items


REVIEW_RUN = "alice/bioinformatics/literature-review-alice/review-alice-1"
"""The demo run whose steps recalled memories (its ``runs_frame`` id)."""
LATE_RESULT = ("BLAST of BRCA2 against nr returned 42 hits; best hit Danio rerio at 71.3% identity"
               " (zebrafish orthologue).")
"""The result the review's second step should have found: it was stored only after the run."""


def load_demo(mem: Memory, *, progress: bool = False) -> None:
    """Fill ``mem`` with the demo sample and, on a store that keeps recalls, one run that recalled.

    The run (``REVIEW_RUN``) is alice's literature review: its first step recalls earlier
    results, its second asks for the BRCA2 zebrafish BLAST result and fails, because that
    result (``LATE_RESULT``) was stored ten minutes after the run; replaying that recall against
    today's store finds it. Times and ids are fixed like the rest of the sample (the searches
    are real, their recalls written as an import), so notebooks show the same thing everywhere.
    """
    mem.add_many(demo_items(), progress=progress)
    from memkit._core._port import SupportsRecalls
    from memkit._core._recalls import Recall, RecalledMemory
    from memkit._sync import call

    provider = mem.provider
    if not isinstance(provider, SupportsRecalls):
        return
    user, agent, workflow_id, run_id = "alice", "bioinformatics", "literature-review-alice", "review-alice-1"
    notes = {"type": {"$ne": "trace"}}
    clock = datetime(2026, 1, 20, 9, 0, tzinfo=UTC)
    steps = [
        ("recall_prior_work", {"gene": "TP53"}, "TP53 apoptosis co-expression module", 1.8),
        ("find_orthologue", {"gene": "BRCA2", "species": "Danio rerio"},
         "BRCA2 BLAST orthologue Danio rerio zebrafish", 2.4),
    ]
    rows: list[dict[str, Any]] = []
    recalls: list[Recall] = []
    for index, (name, params, query, seconds) in enumerate(steps):
        hits = mem.search(query, user, agent, limit=3, filters=notes)
        recalls.append(Recall(
            id=str(uuid.uuid5(_NS, f"recall/{run_id}/{index}")), created_at=clock + timedelta(seconds=0.4),
            user_id=user, agent_id=agent, query=query, mode=str((hits[0].score_details or {}).get("mode", "keyword"))
            if hits else "keyword", filters=notes, limit=3, workflow_id=workflow_id, run_id=run_id,
            step_index=index, step_name=name, attempt=1,
            hits=[RecalledMemory(id=h.id, rank=rank, score=h.score, details=h.score_details, content=h.content)
                  for rank, h in enumerate(hits, start=1)],
        ))
        found = any("BRCA2" in h.content and "Danio rerio" in h.content for h in hits)
        failed = index == 1 and not found
        data = {
            "step_name": name, "tool": "memory", "status": "failed" if failed else "success", "step_index": index,
            "run_id": run_id, "parameters": params, "result": None if failed else {"found": len(hits)},
            "error": "LookupError: no BRCA2 orthologue in Danio rerio among the recalled results" if failed else None,
            "duration": seconds, "retry_count": 0, "timestamp": clock.timestamp(),
        }
        record = trace_record(agent, workflow_id, data, user)
        rows.append(_item(record.content, user, agent, record.metadata, clock + timedelta(seconds=seconds)))
        clock += timedelta(seconds=seconds + 0.5)
    late = clock + timedelta(minutes=10)
    rows.append(_item(LATE_RESULT, user, agent, {"topic": "homology", "gene": "BRCA2", "tool": "blast"}, late))
    mem.add_many(rows)
    call(provider, _add_recalls, recalls)


async def _add_recalls(provider: MemoryProvider, recalls: list[Recall]) -> None:
    from memkit._core._port import SupportsRecalls

    if isinstance(provider, SupportsRecalls):
        await provider.add_recalls(recalls)
