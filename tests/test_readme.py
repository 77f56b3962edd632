"""README.md says only true things: its Python examples run, its tables match the code.

Each ```python block runs on its own, in a fresh namespace, as if pasted
into an interpreter (once, with the twin ``import fastframe`` picks). The
tables are checked wherever they are: in the README or in the documentation
site's pages (docs/, whose examples tests/test_docs.py runs).
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import fastframe
from conftest import REPO
from fastframe.codec import _options
from fastframe.codec._errors import DecodeError

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README, re.M | re.S)
# the hand-written pages (the API reference's come from the docstrings and hold no such tables)
DOC_PAGES = [
    path.read_text(encoding="utf-8")
    for path in sorted((REPO / "docs").rglob("*.md"))
    if not {"_build", "_generated", "api"} & set(path.relative_to(REPO / "docs").parts)
]


def _sections(title: str) -> list:
    """The section ``title`` of the README and of every docs page that has one (at least one)."""
    found = [
        match.group(1)
        for text in [README, *DOC_PAGES]
        for match in re.finditer(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    ]
    assert found, f"neither the README nor docs/ has a section {title!r}"
    return found


def _table(text: str):
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[1:]]  # skip the header


def test_readme_has_examples():
    # the codec and the client; the other examples are on the site's pages (tests/test_docs.py)
    assert len(BLOCKS) >= 2


def test_readme_links_lead_somewhere():
    """Every link into the repository (the docs pages, SECURITY.md, the chart) names a file that exists."""
    targets = [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README) if "://" not in t]
    assert targets
    for target in targets:
        assert (REPO / target).exists(), target


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = compile(BLOCKS[index], f"README.md python block {index + 1}", "exec")
    exec(code, {"__name__": "__readme__"})


@pytest.mark.parametrize("text", _sections("Decoder options"))
def test_decoder_options_table_matches_the_code(text):
    params = inspect.signature(_options.decoder_options).parameters
    rows = {name.strip("`"): default.strip("`") for name, default, _ in _table(text)}
    assert list(rows) == list(params)
    for name, param in params.items():
        assert ast.literal_eval(rows[name]) == param.default, name


@pytest.mark.parametrize("text", _sections("Limits"))
def test_limits_table_matches_the_constants(text):
    rows = _table(text)
    limits = {row[0].strip("`"): row[1] for row in rows}
    assert limits == {
        "max_header_count": f"`DEFAULT_MAX_HEADER_COUNT` = {fastframe.DEFAULT_MAX_HEADER_COUNT}",
        "max_line_length": f"`DEFAULT_MAX_LINE_LENGTH` = {fastframe.DEFAULT_MAX_LINE_LENGTH} bytes",
        "max_body_size": f"`DEFAULT_MAX_BODY_SIZE` = {fastframe.DEFAULT_MAX_BODY_SIZE} bytes",
        "max_frame_size": f"`DEFAULT_MAX_FRAME_SIZE` = {fastframe.DEFAULT_MAX_FRAME_SIZE} bytes",
    }
    everything = "".join([README, *DOC_PAGES])
    assert fastframe.DEFAULT_MAX_BODY_SIZE == 100 * 1024 * 1024 and "(100 MiB)" in everything
    assert fastframe.DEFAULT_MAX_FRAME_SIZE == 116 * 1024 * 1024 and "(116 MiB)" in everything


@pytest.mark.parametrize("text", _sections("Errors"))
def test_error_table_matches_the_classes(text):
    from fastframe.protocol import spec

    rows = _table(text)
    listed = {row[0].strip("`"): row[1].strip("`") for row in rows}
    classes = {name: getattr(fastframe, name) for name in fastframe.__all__}
    errors = {
        name: cls for name, cls in classes.items() if isinstance(cls, type) and issubclass(cls, fastframe.FrameError)
    }
    errors["fastframe.protocol.spec.ValidationError"] = spec.ValidationError
    assert set(listed) == set(errors) - {"FrameError"}
    for name, code in listed.items():
        assert errors[name].code == code, name
    assert all(issubclass(cls, DecodeError) for name, cls in errors.items() if listed.get(name, "").startswith(
        ("invalid-escape", "bad-", "missing-null", "limit-", "body-", "truncated")))  # fmt: skip


@pytest.mark.parametrize("text", _sections("Tolerances and the brokers that need them"))
def test_tolerances_table_names_real_options(text):
    params = inspect.signature(_options.decoder_options).parameters
    for row in _table(text):
        name = row[0].strip("`").split("=")[0]
        assert name in params, name


@pytest.mark.parametrize("text", _sections("Command line"))
def test_cli_options_in_readme_exist(text):
    from fastframe import cli

    parser = cli._build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    every_help = parser.format_help() + "".join(sub.format_help() for sub in commands.values())
    section = text.split("\n## ")[0]  # the commands' overview (a docs page goes on to other topics)
    for option in set(re.findall(r"`(--[a-z-]+)", section)):
        assert option in every_help, option


@pytest.mark.parametrize("text", _sections("Development"))
def test_development_commands_are_make_targets(text):
    makefile = (REPO / "Makefile").read_text()
    targets = re.findall(r"^make (\w+)", text, re.M)
    assert {"demo", "test"} <= set(targets)
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_benchmark_figures_are_the_benchmarks_pages():
    """The README's benchmark figures are copied from docs/benchmarks.md, where each table has its run
    and command: none is from elsewhere (two figures of different runs side by side disagreed)."""
    section = README.split("\n## Benchmarks\n")[1].split("\n## ")[0]
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    figures = re.findall(r"\d[\d,.]*(?:[kMx×%]| µs| MB/s)", section)
    assert len(figures) >= 15
    for figure in figures:
        number = figure.replace(" µs", "").replace(" MB/s", "")
        assert number in page, figure
    assert "`make bench`" in section
