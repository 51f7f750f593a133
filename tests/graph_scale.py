"""A researcher's store at scale, written the way an agent writes it: 5,000 memories of one namespace
(genes drawn Zipf-like, lists of genes, a misspelt key, memories with no metadata), runs whose steps
search memory (the recall audit), and a second user sharing the workflow id and the genes.

Used by the grouped-graph tests and, as source text, by the JupyterLab test's notebook.
"""

from __future__ import annotations

import random
from typing import Any

GENES = [f"G{i}" for i in range(1, 400)]
FAMOUS = ["TP53", "BRCA1", "EGFR", "KRAS", "MYC", "PTEN", "MDM2", "ATM"]


def scale_items(n: int = 5_000, user: str = "ana", agent: str = "bio", seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pool = FAMOUS + GENES
    items: list[dict[str, Any]] = []
    for i in range(n):
        gene = pool[min(int(rng.paretovariate(0.9)) - 1, len(pool) - 1)]
        roll = rng.random()
        if roll < 0.06:
            meta: dict[str, Any] = {}
        elif roll < 0.1:
            meta = {"Gene": gene}  # a spelling the entity fields do not know
        elif roll < 0.6:
            meta = {"gene": [gene, rng.choice(FAMOUS)], "topic": rng.choice(["DNA repair", "apoptosis", "signalling"]),
                    "disease": rng.choice(["breast cancer", "lung cancer", "glioma", "leukaemia", "melanoma"])}
        else:
            meta = {"gene": gene, "topic": rng.choice(["DNA repair", "apoptosis", "signalling", "metabolism"])}
        items.append({"content": f"note {i}: {gene} {rng.choice(['knockdown', 'variant', 'expression', 'ChIP-seq'])}"
                                 f" in {rng.choice(['HeLa', 'MCF7', 'A549', 'tumour sample'])}",
                      "user_id": user, "agent_id": agent, "metadata": meta})
    return items


def fill_scale(mem: Any, n: int = 5_000, runs: int = 40) -> None:
    """``n`` memories of ana / bio with ``runs`` runs of "variant-calling" whose first step searches for
    TP53, and ben / bio with his own TP53 notes and a run of the same workflow id."""
    from memkit.traces import ExecutionHistory

    mem.add_many(scale_items(n - 5 * runs))
    mem.add_many([{"content": f"ben's TP53 note {i}", "user_id": "ben", "agent_id": "bio",
                   "metadata": {"gene": "TP53"}} for i in range(30)])
    for user, count in (("ana", runs), ("ben", 1)):
        for r in range(count):
            history = ExecutionHistory(memory_provider=mem, workflow_id="variant-calling", agent_id="bio",
                                       user_id=user, run_id=f"{user}-run-{r}")
            with history.step("look_up", tool="memory"):
                mem.search("TP53 knockdown" if r % 2 else "BRCA1 variant", user, "bio", limit=3, mode="keyword")
            for name, tool in (("align", "bwa"), ("call", "gatk"), ("filter", "bcftools"), ("report", "multiqc")):
                with history.step(name, tool=tool):
                    pass
            history.flush()
