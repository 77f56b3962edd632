"""The documentation site (docs/) says only true things: its Python examples run, its tables match the code.

Each ```python block of every page runs on its own, in a fresh namespace, as the README's do
(tests/test_readme.py, which also checks the codec's tables wherever they are). The Spark pages'
```py blocks run in tests/spark/test_spark_readme.py. The site itself is built by ``make docs``
(warnings as errors), which .ci/run runs before the suite; the tests of the built site (each name of
the API reference once and indexed, the errors page) read that build, or build one when it is stale.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from _extras import require
from _shared import IN_CI
from conftest import REPO

DOCS = REPO / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts and "_generated" not in path.parts)
BLOCKS = [
    (path, index, block)
    for path in PAGES
    for index, block in enumerate(re.findall(r"^```python\n(.*?)^```$", path.read_text(encoding="utf-8"), re.M | re.S))
]


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert match, f"no section {title!r}"
    return match.group(1)


def table(text: str) -> List[List[str]]:
    """The first markdown table in ``text``, as rows of cells (header row dropped; no cell holds a "|")."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows[1:]]


def test_the_site_has_pages_and_examples() -> None:
    names = {path.relative_to(DOCS).as_posix() for path in PAGES}
    assert {"index.md", "getting-started.md", "guides/codec.md", "guides/client.md", "benchmarks.md"} <= names
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize(
    "path, index, block", BLOCKS, ids=[f"{p.relative_to(DOCS).as_posix()}:{i + 1}" for p, i, _ in BLOCKS]
)
def test_example_runs(path: Path, index: int, block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if re.search(r"wss?://|ws_port|fastframe\.websocket", block):
        require("websockets", "ws")  # (a wheel tested with the test extra only has no WebSocket)
    monkeypatch.chdir(tmp_path)
    code = compile(block, f"{path.relative_to(REPO)} python block {index + 1}", "exec")
    exec(code, {"__name__": "__docs__"})


def test_client_options_table_is_connects_signature() -> None:
    from fastframe import aio

    params = {
        name: param.default
        for name, param in inspect.signature(aio.connect).parameters.items()
        if param.kind is not inspect.Parameter.VAR_KEYWORD
    }
    listed: Dict[str, Any] = {}
    for names_cell, default_cell, _ in table(section(page("guides/client.md"), "Options of `connect()`")):
        if names_cell == "other keywords":
            continue
        names = [name.strip("`") for name in names_cell.split(", ")]
        defaults = ast.literal_eval(default_cell.replace("`", ""))
        if len(names) == 1 or not isinstance(defaults, tuple):  # "`None`" for two names: both None
            defaults = [defaults] * len(names)
        listed.update(zip(names, defaults))
    assert listed == params


def _server_default(cell: str) -> Any:
    cell = cell.replace("`", "")
    if cell.endswith(" MiB"):
        return int(cell[: -len(" MiB")]) * 1024 * 1024
    return ast.literal_eval(cell.removesuffix(" s"))


def test_server_options_table_is_serves_options() -> None:
    from fastframe import aio

    defaults: Dict[str, Any] = vars(sys.modules[aio.serve.__module__])["_DEFAULTS"]  # what serve() accepts
    listed: Dict[str, Any] = {}
    for names_cell, default_cell, _ in table(section(page("guides/server.md"), "The server under it")):
        names = [name.strip("`") for name in names_cell.split(", ")]
        if names in (["decoder_options"], ["ssl"]):  # serve()'s own parameters
            assert names[0] in inspect.signature(aio.serve).parameters
            continue
        # "(10000, 10000), 2.0" for two names; "1 MiB", "10.0 s" for one
        values = ast.literal_eval(default_cell) if len(names) > 1 else [_server_default(default_cell)]
        listed.update(zip(names, values))
    assert listed == defaults


def _state_diagram() -> Any:
    spec = importlib.util.spec_from_file_location("state_diagram", DOCS / "state_diagram.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_state_diagrams_come_from_the_connections() -> None:
    from fastframe.protocol import State

    diagram = _state_diagram()
    client: List[Tuple[State, str, State]] = diagram.transitions("client")
    server: List[Tuple[State, str, State]] = diagram.transitions("server")
    assert (State.IDLE, "`connect()`", State.CONNECTING) in client
    assert (State.CONNECTING, "CONNECTED received", State.CONNECTED) in client
    assert (State.CONNECTED, "`disconnect(receipt=...)`", State.DISCONNECTING) in client
    assert (State.DISCONNECTING, "RECEIPT for the DISCONNECT received", State.CLOSED) in client
    assert (State.CONNECTING, "`accept()`", State.CONNECTED) in server
    assert (State.CONNECTING, "`reject(message)`", State.CLOSED) in server
    # what a connection refuses is no arrow: a client cannot disconnect before it connected
    assert not [edge for edge in client if edge[0] is State.IDLE and "disconnect" in edge[1]]
    assert all(source is not State.CLOSED for source, _, _ in client + server)  # CLOSED is final
    text = diagram.markdown("client")
    assert "| `CONNECTED` | `disconnect()` | `CLOSED` |" in text


def test_every_page_is_in_a_table_of_contents() -> None:
    listed = set()
    for path in PAGES:
        for block in re.findall(r"^```\{toctree\}\n(.*?)^```$", path.read_text(encoding="utf-8"), re.M | re.S):
            for line in block.splitlines():
                if line and not line.startswith(":"):
                    listed.add((path.parent / line.strip()).relative_to(DOCS).as_posix())
    pages = {path.relative_to(DOCS).with_suffix("").as_posix() for path in PAGES}
    assert pages - listed == {"index"}


def _built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML site: ``make docs``' when it is newer than every page and every source file (CI builds
    it before the suite), else a build into a temporary folder (Sphinx needed: the docs extra)."""
    built = DOCS / "_build" / "html"
    if (built / "objects.inv").exists():
        stamp = (built / "objects.inv").stat().st_mtime
        sources = [*DOCS.glob("**/*.md"), DOCS / "conf.py", *(REPO / "src" / "fastframe").rglob("*.py")]
        if all(path.stat().st_mtime < stamp for path in sources if "_build" not in path.parts):
            return built
    if importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_parser") is None:
        reason = "Sphinx is not installed (pip install -e .[docs], or make docs)"
        if IN_CI:  # the clone-based CI builds the site before the suite
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-E", "-b", "html", "-d", str(out / ".doctrees"), str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built_site(tmp_path_factory)


def test_the_reference_documents_each_name_once_and_indexed(site: Path) -> None:
    """Every entry of the API reference has its anchor (an index entry) and none is there twice: a
    module documented whole without an index (autodoc's default members) doubled most of the clients."""
    seen: Dict[str, str] = {}
    for page in sorted((site / "api").glob("*.html")):
        html = page.read_text(encoding="utf-8")
        entries = re.findall(r'<dt class="sig sig-object py"(?: id="([^"]*)")?', html)
        unindexed = sum(1 for anchor in entries if not anchor)
        assert not unindexed, f"{page.name}: {unindexed} entries without an index entry (documented twice?)"
        for anchor in entries:
            assert anchor not in seen, f"{anchor} on {page.name} and {seen[anchor]}"
            seen[anchor] = page.name
    assert {"fastframe.sync.Client", "fastframe.aio.connect", "fastframe.Decoder"} <= set(seen)
    # public constructors only: a class a program gets from connect() shows none of its internals
    sync_page = (site / "api" / "sync.html").read_text(encoding="utf-8")
    client = re.search(r'<dt class="sig sig-object py" id="fastframe.sync.Client">(.*?)</dt>', sync_page, re.S)
    assert client and "runner" not in client.group(1) and "sig-paren" not in client.group(1)
    aio_page = (site / "api" / "aio.html").read_text(encoding="utf-8")
    for page, name in [
        (sync_page, f"sync.{n}") for n in ("Message.subscription", "Message.message_id", "Subscription.ack")
    ] + [(aio_page, "aio.Subscription.id")]:
        entry = re.search(rf'id="fastframe.{name}">.*?</dt>\s*<dd>(.*?)</dd>', page, re.S)
        assert entry and re.sub(r"<[^>]+>", "", entry.group(1)).strip(), f"fastframe.{name} has no text"


def test_the_errors_page_lists_every_exception_class(site: Path) -> None:
    from fastframe import aio, protocol

    html = (site / "errors.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", html)
    for cls in (aio.HeartbeatTimeout, protocol.RemoteProtocolError):
        assert f"{cls.__module__.split('._')[0]}.{cls.__name__}" in text
    tree = text[text.index("(built in)") :]  # the generated list, under the page's introduction
    assert tree.index("fastframe.FrameError") < tree.index("fastframe.DecodeError") < tree.index("TruncatedError")
