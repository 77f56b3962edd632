"""The README's Spark section says only true things: its examples run, its tables match the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Set

from fastframe.sample_archive import generate_archive
from fastframe.spark import COLUMNS, option_names

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
SECTION = re.search(r"^## Spark\n(.*?)(?=^## )", README, re.M | re.S).group(1)  # type: ignore[union-attr]


def subsection(title: str) -> str:
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##)", SECTION, re.M | re.S)
    assert match, f"no subsection {title!r} in the README's Spark section"
    return match.group(1)


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


def test_the_column_table_is_the_schema() -> None:
    (table,) = [t for t in tables(subsection("Reading")) if t and t[0][0] == "`path`"]
    assert [(r[0].strip("`"), r[1], r[2] == "yes", r[3]) for r in table] == list(COLUMNS)


def test_the_option_tables_name_every_option() -> None:
    read = [t for t in tables(subsection("Reading")) if t and t[0][0].startswith("`path`, `paths`")]
    assert len(read) == 1
    assert set().union(*(names_in(row[0]) for row in read[0])) == set(option_names("read"))
    (write,) = tables(subsection("Writing"))
    assert {row[0].strip("`") for row in write} | {"path"} == set(option_names("write"))


def test_the_examples_run(spark: Any, tmp_path: Path) -> None:
    blocks = re.findall(r"^```py\n(.*?)^```$", SECTION, re.M | re.S)
    assert len(blocks) == 2
    generate_archive(str(tmp_path / "archive"))  # what `fastframe sample-archive archive/` writes
    namespace: Dict[str, Any] = {"__name__": "__readme__"}
    for index, block in enumerate(blocks):
        # relative paths resolve against the directory Spark started in (as for Spark's own sources)
        for name in ("archive/", "copy/"):
            block = block.replace(f'"{name}"', repr(str(tmp_path / name)))
        exec(compile(block, f"README.md Spark block {index + 1}", "exec"), namespace)
    assert namespace["spark"] is spark  # get_session() found the running session
