"""The README's memory-graph examples run as written and print what they promise."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def graph_examples() -> list[str]:
    text = README.read_text()
    section = text[text.index("## The memory graph"):]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def run(code: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    return out.getvalue().splitlines()


def promised(code: str) -> list[str]:
    lines = [line.strip() for line in code.splitlines()]
    return [line.split("# ", 1)[1].strip() for line in lines if line.startswith("print(") and "# " in line]


def test_readme_graph_examples_run_and_print_what_they_say() -> None:
    examples = graph_examples()
    assert len(examples) == 3
    rows_only = run(examples[0])
    assert rows_only == promised(examples[0])
    falkordb = run(examples[1])
    assert falkordb[0] == "['BRCA1 and TP53 interact']"
    assert falkordb[1:] == promised(examples[1])
    assert run(examples[2]) == promised(examples[2])
