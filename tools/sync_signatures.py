"""Write the blocking API's signatures from the asyncio API's, so they are typed once.

``fastframe.sync``'s bodies are written by hand (each crosses the thread boundary its own way, and
the hot ones spell their parameters out: see docs/architecture.md), but what a user sees of a method
is the asyncio one's: its parameters (names, kinds, annotations, defaults, order) and, unless
:data:`OWN_DOCSTRINGS` says why not, its docstring. For every public method that a class of
``fastframe.sync`` shares with its ``fastframe.aio`` namesake this rewrites, in place, what lies
between the ``def`` and the body: the parameters and the docstring. The blocking side keeps its
return annotation, its bodies and the parameters only it takes (:data:`EXTRA_PARAMETERS`).

    python tools/sync_signatures.py          # rewrite src/fastframe/sync/*.py (`make sync-signatures`)
    python tools/sync_signatures.py --check  # exit 1 with a diff when they are not what it writes

It reads the sources with :mod:`ast` (nothing is imported) and writes what ``ruff format`` leaves
as it is. tests/sync/test_api_mirror.py runs ``--check`` and holds the two APIs to the tables here.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "fastframe"
LINE_LENGTH = 120  # pyproject.toml's [tool.ruff]

# each blocking module, the asyncio module its classes mirror, and the classes (same name on both sides)
MODULES = [
    ("sync/_client.py", "aio/_client.py", ("Client",)),
    ("sync/_subscription.py", "aio/_subscription.py", ("Message", "Subscription", "Transaction")),
]

# The differences on purpose, the only ones (tests/sync/test_api_mirror.py checks the classes against them).
# public methods only one side has, and why
ONLY_AIO: Dict[str, Set[str]] = {
    "Client": {"send_nowait", "start_request", "subscribe_into", "session"},  # loop-side plumbing
    "Subscription": {"get_nowait"},  # for code that cannot await; a thread waits with get()
}
ONLY_SYNC: Dict[str, Set[str]] = {
    "Client": {"async_client", "loop", "flush", "server"},  # the thread boundary's own calls
    "Subscription": {"held", "start_worker", "join_worker", "end", "worker"},  # threads
}
# parameters only the blocking method takes: kept from its source, after the asyncio ones of their kind
EXTRA_PARAMETERS: Dict[Tuple[str, str], Tuple[str, ...]] = {
    ("Client", "subscribe"): ("on_message", "on_error"),  # a worker thread per subscription
    ("Client", "wait_closed"): ("timeout",),  # (asyncio: asyncio.wait_for around it)
}
# shared methods left as written: aio.Receiver's, which the client calls on its loop (mypy holds both
# classes to that protocol; each docstring says what its class does there)
RECEIVER_METHODS: Dict[str, Set[str]] = {"Subscription": {"deliver", "finish", "release", "restart"}}
# blocking methods whose docstring is written by hand, and what it says that the asyncio one does not
OWN_DOCSTRINGS: Dict[Tuple[str, str], str] = {
    ("Client", "send"): "without a receipt it returns once the frame is queued for the I/O thread",
    ("Client", "subscribe"): "on_message and on_error: the subscription's worker thread",
    ("Client", "ack"): "without a receipt an unknown id is refused by the next call",
    ("Client", "request"): "any number of threads may wait at once",
    ("Client", "begin"): "queued like a SEND: nothing to wait for",
    ("Client", "disconnect"): "what was queued goes out first; the I/O thread ends",
    ("Client", "close"): "every waiting thread fails at once",
    ("Client", "wait_closed"): "its timeout",
    ("Subscription", "get"): "TimeoutError, and the error after a clean end",
    ("Subscription", "get_batch"): "any number of threads may take at once",
}
# what an annotation of the asyncio API names, in the blocking API (a name not here means its namesake)
TYPES = {"Receiver": "Subscription"}  # (the blocking client's subscriptions are its receivers)
# what a copied docstring says differently for the blocking API
DOCSTRING_WORDS = [("``async with ", "``with ")]

# connect(): written by hand (its hooks and messages run on the I/O thread); the options differ only so
CONNECT_ONLY_AIO = {"message_class"}  # the blocking client sets its own
CONNECT_ONLY_SYNC = {"outbox"}
CONNECT_DEFAULTS = {"max_queue", "coalesce_reads"}  # documented in fastframe.sync.connect


class Method:
    """A method's node in its module's source."""

    def __init__(self, source: str, node: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> None:
        self.source, self.node = source, node

    def text(self, node: ast.AST) -> str:
        """``node``'s source, which must be one line (an annotation, a default)."""
        segment = ast.get_source_segment(self.source, node)
        if segment is None or "\n" in segment:
            raise SystemExit(f"{self.node.name}: write {ast.unparse(node)!r} on one line")
        return segment

    def parameter(self, arg: ast.arg, default: Optional[ast.expr], types: Dict[str, str]) -> str:
        text = arg.arg
        if arg.annotation is not None:
            annotation = self.text(arg.annotation)
            for name, replacement in types.items():
                annotation = re.sub(rf"(?<![\w.]){name}\b", replacement, annotation)
            text += f": {annotation}"
        if default is not None:
            text += f" = {self.text(default)}" if arg.annotation is not None else f"={self.text(default)}"
        return text

    def parameters(self, types: Dict[str, str]) -> Dict[str, List[str]]:
        """The parameters, rendered, by kind: posonly, args, vararg, kwonly, kwarg."""
        a = self.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults: List[Optional[ast.expr]] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        rendered = [self.parameter(arg, default, types) for arg, default in zip(positional, defaults)]
        return {
            "posonly": rendered[: len(a.posonlyargs)],
            "args": rendered[len(a.posonlyargs) :],
            "vararg": [] if a.vararg is None else ["*" + self.parameter(a.vararg, None, types)],
            "kwonly": [self.parameter(arg, d, types) for arg, d in zip(a.kwonlyargs, a.kw_defaults)],
            "kwarg": [] if a.kwarg is None else ["**" + self.parameter(a.kwarg, None, types)],
        }

    def docstring(self) -> ast.Expr:
        first = self.node.body[0]
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
            raise SystemExit(f"{self.node.name} (line {self.node.lineno}): give it a docstring")
        return first

    def docstring_text(self, indent: int) -> str:
        """The docstring's source lines, moved to ``indent``."""
        doc = self.docstring()
        lines = self.source.splitlines()[doc.lineno - 1 : doc.end_lineno]
        lines[0] = lines[0][doc.col_offset :]
        return "\n".join(
            " " * indent + line[doc.col_offset if i else 0 :] if line.strip() else "" for i, line in enumerate(lines)
        )


def methods(source: str, classes: Sequence[str]) -> Dict[Tuple[str, str], Method]:
    """The public, undecorated methods of ``classes`` in ``source`` (properties are attributes)."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name in classes:
            for item in node.body:
                if (
                    isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not item.name.startswith("_")
                    and not item.decorator_list
                ):
                    found[node.name, item.name] = Method(source, item)
    return found


def signature(name: str, indent: str, parameters: Sequence[str], returns: str) -> str:
    """``def`` and its parameters as ruff formats them: on one line, else on one line of their own,
    else one a line."""
    head, tail = f"{indent}def {name}(", f") -> {returns}:"
    one_line = head + ", ".join(parameters) + tail
    if len(one_line) <= LINE_LENGTH:
        return one_line
    inner = indent + " " * 4
    if len(inner + ", ".join(parameters)) <= LINE_LENGTH:
        return f"{head}\n{inner}{', '.join(parameters)}\n{indent}{tail}"
    return head + "\n" + "".join(f"{inner}{p},\n" for p in parameters) + indent + tail


def blocking_method(cls: str, aio: Method, sync: Method) -> str:
    """What ``sync``'s ``def`` through its docstring becomes."""
    name = sync.node.name
    wanted = aio.parameters(TYPES)
    extra = EXTRA_PARAMETERS.get((cls, name), ())
    own = sync.parameters({})
    sync_args = sync.node.args
    for kind, args in (("args", sync_args.args), ("kwonly", sync_args.kwonlyargs)):
        wanted[kind] += [text for arg, text in zip(args, own[kind]) if arg.arg in extra]
    kept = {arg.arg for arg in [*sync_args.args, *sync_args.kwonlyargs] if arg.arg in extra}
    if kept != set(extra):
        raise SystemExit(f"{cls}.{name}: EXTRA_PARAMETERS names {sorted(set(extra) - kept)}, not parameters of it")
    parameters = [*wanted["posonly"], *(["/"] if wanted["posonly"] else []), *wanted["args"], *wanted["vararg"]]
    if wanted["kwonly"] and not wanted["vararg"]:
        parameters.append("*")
    parameters += [*wanted["kwonly"], *wanted["kwarg"]]

    indent = sync.node.col_offset
    if sync.node.returns is None:
        raise SystemExit(f"{cls}.{name}: annotate what it returns")
    returns = sync.text(sync.node.returns)
    if (cls, name) in OWN_DOCSTRINGS:
        doc = sync.docstring_text(indent + 4)
    else:
        doc = aio.docstring_text(indent + 4)
        for before, after in DOCSTRING_WORDS:
            doc = doc.replace(before, after)
    return signature(name, " " * indent, parameters, returns) + "\n" + doc


def generate(sync_source: str, aio_source: str, classes: Sequence[str]) -> str:
    """``sync_source`` with the signatures and docstrings of its shared methods written from ``aio_source``."""
    aio_methods = methods(aio_source, classes)
    sync_methods = methods(sync_source, classes)
    lines = sync_source.splitlines(keepends=True)
    for key, sync in sorted(sync_methods.items(), key=lambda item: -item[1].node.lineno):
        if key not in aio_methods or key[1] in RECEIVER_METHODS.get(key[0], ()):
            continue
        start, end = sync.node.lineno - 1, sync.docstring().end_lineno or 0
        lines[start:end] = [blocking_method(key[0], aio_methods[key], sync) + "\n"]
    return "".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff if a file would change")
    args = parser.parse_args(argv)
    stale = False
    for sync_path, aio_path, classes in MODULES:
        path = PACKAGE / sync_path
        current = path.read_text(encoding="utf-8")
        wanted = generate(current, (PACKAGE / aio_path).read_text(encoding="utf-8"), classes)
        if wanted == current:
            continue
        if args.check:
            stale = True
            name = str(path.relative_to(REPO))
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), name, name))
        else:
            path.write_text(wanted, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print("the blocking API's signatures are not the asyncio API's: run `make sync-signatures`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
