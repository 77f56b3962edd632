"""The command line answers every wrong input with one line (what is wrong, what to do) and a non-zero
status, never a traceback unless --debug; --version; each subcommand's help ends with examples."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import fastframe


def fastframe_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fastframe", *args], capture_output=True, text=True, timeout=60)


def one_line_failure(done: subprocess.CompletedProcess, rc: int = 1) -> str:
    assert done.returncode == rc, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    return done.stderr.strip().splitlines()[-1]


def test_version():
    done = fastframe_cli("--version")
    assert (
        done.returncode == 0
        and done.stdout.strip() == f"fastframe {fastframe.__version__} ({fastframe.IMPLEMENTATION})"
    )


def test_a_port_out_of_range():
    line = one_line_failure(fastframe_cli("broker", "--port", "99999"), rc=2)
    assert line == "fastframe broker: error: argument --port: a port is 0 to 65535, not 99999"


def test_a_port_in_use_and_debug():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        line = one_line_failure(fastframe_cli("broker", "--port", port))
        assert line.startswith("fastframe broker: ") and "address already in use" in line and "--debug" in line
        done = fastframe_cli("--debug", "broker", "--port", port)
        assert done.returncode != 0 and "Traceback" in done.stderr


def test_replay_of_a_missing_file_names_the_file():
    line = one_line_failure(fastframe_cli("replay", "/missing/conn-0001.c2s.stomp", "--to", "127.0.0.1:61697"))
    assert line.startswith("fastframe replay: /missing/conn-0001.c2s.stomp: no such file")
    assert "61697" not in line


def test_an_unknown_option_shows_the_commands_usage(tmp_path):
    done = fastframe_cli("decode", str(tmp_path / "x.stomp"), "--bogus")
    line = one_line_failure(done, rc=2)
    assert line == "fastframe decode: error: unrecognized arguments: --bogus"
    assert done.stderr.startswith("usage: fastframe decode ")


@pytest.mark.parametrize("command", ["decode", "broker", "record", "replay", "index", "sample-archive"])
def test_each_command_has_a_description_and_examples(command):
    done = fastframe_cli(command, "--help")
    assert done.returncode == 0
    text = done.stdout
    assert "examples:\n  fastframe " in text
    usage_end = text.index("\n\n")
    assert text[usage_end:].strip().split("\n")[0]  # a description line after the usage


def test_every_example_parses():
    """Each line of every command's examples is accepted by its parser (an example with an option the
    command does not have is a newcomer's first error)."""
    import shlex

    from fastframe.cli import _EXAMPLES, _build_parser

    parser = _build_parser()
    for text in _EXAMPLES.values():
        for line in text.split("\n"):
            for part in line.split("#")[0].replace("&&", "|").split("|"):
                argv = shlex.split(part)
                assert argv[0] == "fastframe", line
                args = parser.parse_args(argv[1:])  # exits (a failure) on an unknown option
                assert args.command in _EXAMPLES, line


def test_stream_without_a_broker_fails_at_once(tmp_path):
    """Before Spark starts (half a minute, and a Java trace): one line naming the address."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = str(closed.getsockname()[1])  # bound, not listening: refused
        done = fastframe_cli(
            "stream", "/queue/x", "--out", str(tmp_path / "out"), "--port", port, "--connect-timeout", "2"
        )
    line = one_line_failure(done)
    assert line.startswith(f"fastframe stream: cannot connect to the broker at 127.0.0.1:{port}: ")
    assert "check --host, --port" in line and len(done.stderr.strip().splitlines()) == 1


def test_a_broker_user_without_a_passcode_separator():
    line = one_line_failure(fastframe_cli("broker", "--port", "0", "--user", "guest"), rc=2)
    assert line == "fastframe broker: error: argument --user: not LOGIN:PASSCODE: 'guest'"


def test_the_jvms_incubator_warning_is_dropped_and_the_rest_kept():
    """What Spark's JVM prints goes through a filter that drops only the warning every Spark 4 start
    prints (a child process started inside it stands in for the JVM)."""
    script = (
        "import subprocess, sys, time\n"
        "from fastframe.cli._spark import _jvm_stderr_filtered\n"
        "with _jvm_stderr_filtered():\n"
        "    child = subprocess.Popen(['sh', '-c', 'sleep 0.2; echo WARNING: Using incubator modules: "
        "jdk.incubator.vector >&2; echo a JVM line >&2'])\n"
        "print('after the start', file=sys.stderr, flush=True)\n"
        "child.wait(); time.sleep(0.3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stderr.splitlines()) == ["a JVM line", "after the start"]


def test_convert_says_what_it_reads_before_spark_starts(tmp_path, monkeypatch, capsys):
    """The first line comes at once: the JVM's start takes half a minute."""
    from _extras import require

    require("pyarrow", "spark")
    from fastframe.cli import _spark, main
    from fastframe.spark import generate_archive

    generate_archive(str(tmp_path / "archive"), connections=1, frames=5)
    said = []

    def start_session(*args):
        said.append(capsys.readouterr().err)
        return 1  # as when Spark cannot start

    monkeypatch.setattr(_spark, "java_hint", lambda: None)
    monkeypatch.setattr(_spark, "start_session", start_session)
    assert main(["convert", str(tmp_path / "archive"), "--out", str(tmp_path / "out")]) == 1
    assert said and said[0].startswith("reading 2 files (") and "with Spark (local[*]) ..." in said[0]
