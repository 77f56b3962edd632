"""README.md says only true things: its Python examples run, its tables match the code.

Each ```python block runs on its own, in a fresh namespace, as if pasted
into an interpreter (once, with the twin ``import fastframe`` picks).
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import fastframe
from conftest import REPO
from fastframe import _options
from fastframe._errors import DecodeError

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README, re.M | re.S)


def _section(title: str) -> str:
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", README, re.M | re.S)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def _table(text: str):
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[1:]]  # skip the header


def test_readme_has_examples():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = compile(BLOCKS[index], f"README.md python block {index + 1}", "exec")
    exec(code, {"__name__": "__readme__"})


def test_decoder_options_table_matches_the_code():
    params = inspect.signature(_options.decoder_options).parameters
    rows = {name.strip("`"): default.strip("`") for name, default, _ in _table(_section("Decoder options"))}
    assert list(rows) == list(params)
    for name, param in params.items():
        assert ast.literal_eval(rows[name]) == param.default, name


def test_limits_table_matches_the_constants():
    rows = _table(_section("Limits"))
    limits = {row[0].strip("`"): row[1] for row in rows}
    assert limits == {
        "max_header_count": f"`DEFAULT_MAX_HEADER_COUNT` = {fastframe.DEFAULT_MAX_HEADER_COUNT}",
        "max_line_length": f"`DEFAULT_MAX_LINE_LENGTH` = {fastframe.DEFAULT_MAX_LINE_LENGTH} bytes",
        "max_body_size": f"`DEFAULT_MAX_BODY_SIZE` = {fastframe.DEFAULT_MAX_BODY_SIZE} bytes",
        "max_frame_size": f"`DEFAULT_MAX_FRAME_SIZE` = {fastframe.DEFAULT_MAX_FRAME_SIZE} bytes",
    }
    assert fastframe.DEFAULT_MAX_BODY_SIZE == 100 * 1024 * 1024 and "(100 MiB)" in README
    assert fastframe.DEFAULT_MAX_FRAME_SIZE == 116 * 1024 * 1024 and "(116 MiB)" in README


def test_error_table_matches_the_classes():
    from fastframe import spec

    rows = _table(_section("Errors"))
    listed = {row[0].strip("`"): row[1].strip("`") for row in rows}
    classes = {name: getattr(fastframe, name) for name in fastframe.__all__}
    errors = {
        name: cls for name, cls in classes.items() if isinstance(cls, type) and issubclass(cls, fastframe.FrameError)
    }
    errors["fastframe.spec.ValidationError"] = spec.ValidationError
    assert set(listed) == set(errors) - {"FrameError"}
    for name, code in listed.items():
        assert errors[name].code == code, name
    assert all(issubclass(cls, DecodeError) for name, cls in errors.items() if listed.get(name, "").startswith(
        ("invalid-escape", "bad-", "missing-null", "limit-", "body-", "truncated")))  # fmt: skip


def test_tolerances_table_names_real_options():
    params = inspect.signature(_options.decoder_options).parameters
    for row in _table(_section("Tolerances and the brokers that need them")):
        name = row[0].strip("`").split("=")[0]
        assert name in params, name


def test_cli_options_in_readme_exist():
    from fastframe import cli

    parser = cli._build_parser()
    decode_help = parser._subparsers._group_actions[0].choices["decode"].format_help()  # type: ignore[union-attr]
    section = _section("Command line")
    for option in set(re.findall(r"`(--[a-z-]+)", section)):
        assert option in decode_help, option


def test_development_commands_are_make_targets():
    makefile = (REPO / "Makefile").read_text()
    section = _section("Development")
    for target in re.findall(r"^make (\w+)", section, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target
