"""The Spark documentation says only true things: its examples run, its tables match the code.

The Spark guide (docs/guides/spark.md), the getting-started page's Spark job, and the README's Spark
section while it has one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest

from fastframe.archive import generate_archive
from fastframe.spark import COLUMNS, option_names

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
GUIDE = (REPO / "docs" / "guides" / "spark.md").read_text(encoding="utf-8")
GETTING_STARTED = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")


def subsection(text: str, title: str) -> str:
    match = re.search(rf"^##+ {re.escape(title)}\n(.*?)(?=^##|\Z)", text, re.M | re.S)
    assert match, f"no subsection {title!r}"
    return match.group(1)


README_SPARK = re.search(r"^## Spark\n(.*?)(?=^## )", README, re.M | re.S)
#: (where, text) of each text with the Spark tables: the guide, and the README while its section has them
TABLES = [("docs/guides/spark.md", GUIDE)] + (
    [("README.md", README_SPARK.group(1))] if README_SPARK and "### Reading" in README_SPARK.group(1) else []
)
#: (where, text, how many ```py blocks it has) for the examples
EXAMPLES = [
    ("docs/guides/spark.md", GUIDE, 2),
    ("docs/getting-started.md", subsection(GETTING_STARTED, "The Spark job"), 1),
] + ([("README.md", README_SPARK.group(1), 1)] if README_SPARK and "```py\n" in README_SPARK.group(1) else [])


def tables(text: str) -> List[List[List[str]]]:
    """Every markdown table in ``text``, as rows of cells (header row dropped)."""
    found, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif current:
            found.append(current[2:])
            current = []
    return found


def names_in(cell: str) -> Set[str]:
    return set(re.findall(r"`([A-Za-z]+)`", cell))


@pytest.mark.parametrize("where, text", TABLES)
def test_the_column_table_is_the_schema(where: str, text: str) -> None:
    (table,) = [t for t in tables(subsection(text, "Reading")) if t and t[0][0] == "`path`"]
    assert [(r[0].strip("`"), r[1], r[2] == "yes", r[3]) for r in table] == list(COLUMNS)


@pytest.mark.parametrize("where, text", TABLES)
def test_the_option_tables_name_every_option(where: str, text: str) -> None:
    read = [t for t in tables(subsection(text, "Reading")) if t and t[0][0].startswith("`path`, `paths`")]
    assert len(read) == 1
    assert set().union(*(names_in(row[0]) for row in read[0])) == set(option_names("read"))
    (write,) = tables(subsection(text, "Writing"))
    assert {row[0].strip("`") for row in write} | {"path"} == set(option_names("write"))


@pytest.mark.parametrize("where, text, count", EXAMPLES)
def test_the_examples_run(where: str, text: str, count: int, spark: Any, tmp_path: Path) -> None:
    blocks = re.findall(r"^```py\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) == count
    generate_archive(str(tmp_path / "archive"))  # what `fastframe sample-archive archive/` writes
    namespace: Dict[str, Any] = {"__name__": "__readme__"}
    for index, block in enumerate(blocks):
        # relative paths resolve against the directory Spark started in (as for Spark's own sources)
        for name in ("archive/", "copy/"):
            block = block.replace(f'"{name}"', repr(str(tmp_path / name)))
        exec(compile(block, f"{where} Spark block {index + 1}", "exec"), namespace)
    assert namespace["spark"] is spark  # get_session() found the running session
