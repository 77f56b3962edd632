"""Sphinx configuration for the fastframe documentation (``make docs`` builds it with -W -n).

The pages are Markdown (MyST), so the code blocks and tables the test suite checks are read the same
way in README.md and in docs/ (tests/test_readme.py, tests/test_docs.py). The API reference is
autodoc over the docstrings of the public names; every name in a documented module's ``__all__``
must appear in it (:func:`check_public_names`), and with ``nitpicky`` every cross-reference to a
fastframe name must resolve.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

# autodoc reads the pure-Python twin, the reference: its signatures are introspectable and it is what
# every installation has (the compiled twin has the same names and behaviour, tests/test_twins.py)
os.environ["FASTFRAME_NO_EXTENSIONS"] = "1"

import state_diagram  # noqa: E402
from sphinx.ext.napoleon import Config, GoogleDocstring  # noqa: E402

import fastframe  # noqa: E402

project = "fastframe"
author = "fastframe developers"
copyright = "fastframe developers, MIT licence"
release = version = fastframe.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode", "sphinx_copybutton"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated"]  # _generated: included by the pages
templates_path: list = []

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # [text](page.md#section-title) links, as on GitHub

html_theme = "furo"
html_title = f"fastframe {release}"
html_static_path = ["_static"]
html_css_files = ["fastframe.css"]  # long code lines wrap
# the copy button copies a console block's commands without the "$ " prompt or the output
copybutton_prompt_text = "$ "
copybutton_only_copy_prompt_lines = True

# The docs extra alone builds the site (a documentation host installs only it): the other extras'
# packages that are not installed are mocked for the whole build, so autodoc still reads the
# docstrings of fastframe.spark, fastframe.websocket and the pytest plugin. (autodoc_mock_imports
# mocks only while a documented module is imported; fastframe.spark imports its names on first use.)
MOCKED = [name for name in ("pyspark", "pyarrow", "websockets", "pytest") if importlib.util.find_spec(name) is None]
_mocks = contextlib.ExitStack()
if MOCKED:
    from sphinx.ext.autodoc.mock import mock

    _mocks.enter_context(mock(MOCKED))
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# a connection's methods live on its shared base class: document them on the public class
autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
    "inherited-members": "BaseException,Exception,ValueError,RuntimeError,OSError,ConnectionError,tuple,object,Enum,dict,int,str,DataSource",
}

# Every cross-reference must resolve (-n): a broken reference to a fastframe name fails the build.
# Names outside fastframe (the standard library, PySpark, pyarrow) have no inventory to resolve
# against offline (intersphinx would fetch one), so they are the only ones let through.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(typing|typing_extensions|collections\.abc|abc|enum|asyncio|ssl|random|argparse|os|io|threading)\..*"),
    (r"py:.*", r"(pyspark|pyarrow|pandas|fsspec)(\..*)?"),
    (r"py:.*", r"_?[A-Z][A-Za-z]*(Hook|Like|Type|Headers|Handler|Connector)"),  # private type aliases
    (
        r"py:class",
        r"(str|bytes|bytearray|memoryview|int|float|bool|object|dict|list|tuple|set|type|"
        r"frozenset|Ellipsis|NoneType|Exception|ValueError|RuntimeError|OSError|ConnectionError|"
        r"TimeoutError|BaseException|Enum|Path|PathLike|Buffer|T|_T|Self)",
    ),
    (
        r"py:class",
        r"(Any|Optional|Union|Tuple|List|Dict|Mapping|Sequence|Iterable|Iterator|Callable|"
        r"Awaitable|Coroutine|AsyncIterator|NamedTuple|Literal|MutableMapping|Set|FrozenSet|Type)",
    ),
    (r"py:.*", r"_?asyncio\..*"),
    (r"py:.*", r"fastframe\.(.*\.)?_\w+(\..*)?"),  # a private module in an annotation's qualified name
    (r"py:func", r"(open|len|print|iter|next|bytes|str|repr|hash|isinstance)"),  # builtins
    (r"py:(exc|obj|data)", r"(ValueError|RuntimeError|TypeError|OverflowError|KeyError|asyncio\..*)"),
    (r"py:.*", r"(Simple)?DataSource\w*(\..*)?"),  # PySpark's, named unqualified in the Spark docstrings
]
# Short names in docstrings that mean a method or attribute of another class than the one documented
# (Sphinx looks them up on the documented one). Each is named here, so a new broken one still fails.
nitpick_ignore = [
    ("py:class", "ClientConnection"),  # fastframe.aio.ClientSession: fastframe.protocol.ClientConnection
    ("py:attr", "closed"),  # fastframe.aio.ClientSession: its client's
    ("py:attr", "error"),
    ("py:meth", "receive_eof"),  # fastframe.protocol.ConnectionClosed: the connection's
    ("py:meth", "receive_data"),  # fastframe.protocol.ProtocolError: the connection's
    ("py:meth", "start"),  # fastframe.spark.standalone's module docstring: StandaloneCluster.start
]

# The modules whose every public name (__all__) the API reference must document.
PUBLIC_MODULES = [
    "fastframe",
    "fastframe.protocol",
    "fastframe.protocol.spec",
    "fastframe.aio",
    "fastframe.sync",
    "fastframe.server",
    "fastframe.broker",
    "fastframe.spark",
    "fastframe.spark.standalone",
    "fastframe.cli",
    "fastframe.capture",
    "fastframe.archive",
    "fastframe.websocket",
    "fastframe.testing",
    "fastframe.pytest_plugin",
]
# Public modules (no part of the name starts with "_") whose names are documented under another
# module's: any other public module without a page fails the build.
DOCUMENTED_ELSEWHERE = {
    "fastframe.codec",
    "fastframe.spark.session",
}


def public_modules() -> list:
    import pkgutil

    found = ["fastframe"]
    for info in pkgutil.walk_packages(fastframe.__path__, "fastframe."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return found


def write_state_diagrams(app) -> None:
    """The protocol guide's state diagrams, generated from the code at every build (never stale)."""
    out = DOCS / "_generated"
    out.mkdir(exist_ok=True)
    for role in ("client", "server"):
        for suffix, text in (("md", state_diagram.markdown(role)), ("svg", state_diagram.svg(role))):
            path = out / f"states-{role}.{suffix}"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")


def exception_tree() -> str:
    """The errors page's body: every public exception class under the class it derives from (Markdown).

    Generated from the classes at every build, so the page says how they inherit as the code does."""
    import inspect
    import re

    names: dict = {}  # class -> the public names it has, in PUBLIC_MODULES order
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                names.setdefault(obj, []).append(f"{module_name}.{name}")

    def parent(cls: type) -> object:
        for base in cls.__mro__[1:]:
            if base in names or base.__module__ == "builtins":
                return base
        raise AssertionError(cls)

    def summary(cls: type) -> str:
        first = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        first = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", first)  # reST roles: code, no link to resolve
        return first.replace("``", "`")

    children: dict = {}
    for cls in names:
        children.setdefault(parent(cls), []).append(cls)
    lines = []

    def add(cls: type, depth: int) -> None:
        own = names[cls]
        also = f" (also `{'`, `'.join(own[1:])}`)" if len(own) > 1 else ""
        lines.append(f"{'  ' * depth}- {{exc}}`{own[0]}`{also}: {summary(cls)}")
        for child in children.get(cls, []):
            add(child, depth + 1)

    for root in sorted((c for c in children if c not in names), key=lambda c: c.__name__):
        lines.append(f"- `{root.__name__}` (built in)")
        for cls in children[root]:
            add(cls, 1)
    return "\n".join(lines) + "\n"


def write_errors_page(app) -> None:
    out = DOCS / "_generated" / "errors.md"
    out.parent.mkdir(exist_ok=True)
    text = exception_tree()
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")


NAPOLEON = Config()


def google_sections(app, what, name, obj, options, lines) -> None:
    """The docstrings' Google-style "Args:" and "Attributes:" sections, as napoleon reads them.

    Not for attributes: their ``#:`` comments read "Open subscriptions: id -> ...", which napoleon
    would take for "type: description".
    """
    if what not in ("attribute", "property", "data"):
        lines[:] = GoogleDocstring(lines, NAPOLEON, app, what, name, obj, options).lines()


# Classes a program gets from a call and never constructs: their constructors' parameters are the
# library's internals, so the reference shows the class without them (the docstrings say where one
# comes from). A class added here that no longer exists fails the build (check_made_by).
MADE_BY = {
    "fastframe.aio.Client",
    "fastframe.aio.Subscription",
    "fastframe.aio.Transaction",
    "fastframe.sync.Client",
    "fastframe.sync.Subscription",
    "fastframe.sync.Message",
    "fastframe.sync.Transaction",
    "fastframe.server.Server",
    "fastframe.server.ServedConnection",
    "fastframe.capture.Recorder",
    "fastframe.capture.Proxy",
    "fastframe.websocket.WebSocketTransport",
}


def hide_private_constructor(app, what, name, obj, options, signature, return_annotation):
    """No constructor signature for the classes in MADE_BY."""
    if what in ("class", "exception") and name in MADE_BY:
        return "", None
    return None


def check_made_by(app, env) -> None:
    from sphinx.util import logging

    documented = env.get_domain("py").objects
    for name in MADE_BY:
        if name not in documented:
            logging.getLogger("fastframe.docs").warning("MADE_BY names %s, which the reference does not document", name)


def check_public_names(app, env) -> None:
    """A public name missing from the API reference is a warning (an error under -W)."""
    from sphinx.util import logging

    logger = logging.getLogger("fastframe.docs")
    documented = set(env.get_domain("py").objects)
    for module_name in public_modules():
        if module_name not in PUBLIC_MODULES and module_name not in DOCUMENTED_ELSEWHERE:
            logger.warning("public module %s has no page in the API reference (docs/api/)", module_name)
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            if f"{module_name}.{name}" not in documented:
                logger.warning("public name %s.%s is not in the API reference", module_name, name)
    codec = importlib.import_module("fastframe.codec")
    for name in sorted(set(codec.__all__) - set(fastframe.__all__)):  # the rest is documented as fastframe's
        if f"fastframe.codec.{name}" not in documented:
            logger.warning("public name fastframe.codec.%s is not in the API reference", name)


def setup(app):
    app.connect("builder-inited", write_state_diagrams)
    app.connect("builder-inited", write_errors_page)
    app.connect("autodoc-process-docstring", google_sections)
    app.connect("autodoc-process-signature", hide_private_constructor)
    app.connect("env-check-consistency", check_public_names)
    app.connect("env-check-consistency", check_made_by)
