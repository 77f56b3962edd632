"""The command line (fastframe.cli) and the sample stream generator (fastframe.archive.generate_stream).

The CLI goes through the public package API; the ``twin`` fixture points the
package at the twin under test, so every decoding test runs with both.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fastframe
from fastframe import archive, cli
from fastframe.protocol.spec import frame_problems

TWIN_NAMES = {"c": "(the compiled Cython twin)", "python": "(the pure-Python twin)"}
FRAME_LINE = re.compile(r"^#(\d+) @(\d+) (\S+)$", re.M)
SUMMARY = re.compile(r"^summary: (\d+) frames \((.*)\), (\d+) heart-beats, (\d+) bytes \((\d+) in bodies\)$", re.M)


@pytest.fixture
def twin(codec, monkeypatch):
    """Make ``import fastframe`` users (the CLI) run on the twin under test."""
    for name in ("Decoder", "Heartbeat", "Frame", "decode", "encode", "Encoder", "IMPLEMENTATION"):
        monkeypatch.setattr(fastframe, name, getattr(codec, name))
    return codec


def run(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def stream_file(tmp_path):
    data = archive.generate_stream(40, seed=7)
    path = tmp_path / "s.stomp"
    path.write_bytes(data)
    return path, data


# --------------------------------------------------------------------------- decode


def test_decode_lists_every_frame(twin, capsys, stream_file):
    path, data = stream_file
    status, out, err = run(capsys, "decode", str(path))
    assert status == 0 and err == ""
    frames = twin.decode(data)
    listed = FRAME_LINE.findall(out)
    assert [(int(n), int(offset), command) for n, offset, command in listed] == [
        (i + 1, frame.offset, frame.command) for i, frame in enumerate(frames)
    ]
    # headers one per line, then the body line, for each frame
    first = out.split("\n#2 ")[0].splitlines()
    assert first[1:] == [f"  {name}: {value}" for name, value in frames[0].headers] + ["  body: 0 bytes"]
    bodies = re.findall(r"^  body: (\d+) bytes", out, re.M)
    assert [int(b) for b in bodies] == [len(f.body) for f in frames]


def test_decode_summary_line(twin, capsys, stream_file):
    path, data = stream_file
    decoder = twin.Decoder()
    frames = decoder.feed(data)
    decoder.close()
    status, out, _ = run(capsys, "decode", str(path))
    (summary,) = SUMMARY.findall(out)
    assert int(summary[0]) == len(frames)
    assert summary[1] == f"CONNECTED 1, MESSAGE {len(frames) - 1}"
    assert int(summary[2]) == decoder.heartbeats
    assert int(summary[3]) == len(data)
    assert int(summary[4]) == sum(len(f.body) for f in frames)
    assert out.rstrip("\n").splitlines()[-1].startswith("summary: ")


def test_decode_summary_only(twin, capsys, stream_file):
    path, _ = stream_file
    _, full, _ = run(capsys, "decode", str(path))
    status, out, _ = run(capsys, "decode", "--summary", str(path))
    assert status == 0
    assert out.splitlines() == [full.splitlines()[-1]]


@pytest.mark.parametrize("chunk", ["1", "7", "100000"])
def test_decode_in_chunks_gives_the_same_listing(twin, capsys, stream_file, chunk):
    path, _ = stream_file
    _, whole, _ = run(capsys, "decode", str(path))
    status, pieces, _ = run(capsys, "decode", "--chunk", chunk, str(path))
    assert status == 0 and pieces == whole


def test_decode_heartbeat_listing(twin, capsys, tmp_path):
    path = tmp_path / "hb.stomp"
    data = b"\n\r\nRECEIPT\nreceipt-id:1\n\n\0\n"
    path.write_bytes(data)
    status, out, _ = run(capsys, "decode", "--heartbeats", str(path))
    assert status == 0
    heartbeats = [line for line in out.splitlines() if "heart-beat " in line]
    assert heartbeats == ["@0 heart-beat b'\\n'", "@1 heart-beat b'\\r\\n'", f"@{len(data) - 1} heart-beat b'\\n'"]
    assert FRAME_LINE.findall(out) == [("1", "3", "RECEIPT")]
    assert "3 heart-beats" in out
    _, quiet, _ = run(capsys, "decode", str(path))
    assert "heart-beat " not in quiet and "3 heart-beats" in quiet


def test_decode_from_stdin(twin, capsys, monkeypatch, stream_file):
    path, data = stream_file
    _, from_file, _ = run(capsys, "decode", str(path))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status, out, _ = run(capsys, "decode", "-", "--chunk", "13")
    assert status == 0 and out == from_file


def test_decode_error_prints_file_offset_message(twin, capsys, tmp_path):
    good = b"RECEIPT\nreceipt-id:1\n\n\0"
    bad = b"SEND\ndestination:/q\nx:tab\\there\n\n\0"
    path = tmp_path / "bad.stomp"
    path.write_bytes(good + bad)
    with pytest.raises(fastframe.InvalidEscapeError) as info:
        twin.decode(good + bad)
    status, out, err = run(capsys, "decode", str(path))
    assert status == 1
    assert info.value.offset == len(good) + bad.index(b"\\t")
    assert err == f"{path}:{info.value.offset}: {info.value.reason} (near {info.value.excerpt!r})\n"
    # the frame completed before the error is still listed, and no summary follows
    assert FRAME_LINE.findall(out) == [("1", "0", "RECEIPT")]
    assert "summary" not in out


def test_decode_truncated_stream(twin, capsys, tmp_path):
    path = tmp_path / "cut.stomp"
    path.write_bytes(b"RECEIPT\nreceipt-id:1\n\n\0SEND\ndestination:/q\n")
    status, out, err = run(capsys, "decode", "--chunk", "5", str(path))
    assert status == 1
    assert err.startswith(f"{path}:") and "stream ended inside a frame (started at offset 23)" in err
    assert FRAME_LINE.findall(out) == [("1", "0", "RECEIPT")]


def test_decode_strict(twin, capsys, tmp_path):
    path = tmp_path / "foo.stomp"
    path.write_bytes(b"FOO\n\n\0")
    assert run(capsys, "decode", str(path))[0] == 0
    status, _, err = run(capsys, "decode", "--strict", str(path))
    assert status == 1 and err.startswith(f"{path}:0: ")


def test_decode_version_and_escapes(twin, capsys, tmp_path):
    path = tmp_path / "v10.stomp"
    path.write_bytes(b"MESSAGE\ndestination:/q\nmessage-id:1\nx:a\\cb\n\n\0")
    _, out_12, _ = run(capsys, "decode", str(path))
    _, out_10, _ = run(capsys, "decode", "--version", "1.0", str(path))
    _, out_rabbit, _ = run(capsys, "decode", "--version", "1.0", "--escapes", "1.2", str(path))
    assert "  x: a:b\n" in out_12
    assert "  x: a\\cb\n" in out_10
    assert "  x: a:b\n" in out_rabbit


def test_decode_activemq_tolerances(twin, capsys, tmp_path):
    no_colon = tmp_path / "nocolon.stomp"
    no_colon.write_bytes(b"MESSAGE\ndestination:/q\nnocolonhere\n\n\0")
    assert run(capsys, "decode", str(no_colon))[0] == 1
    status, out, _ = run(capsys, "decode", "--allow-missing-colon", str(no_colon))
    assert status == 0 and "  nocolonhere: \n" in out
    undefined = tmp_path / "tab.stomp"
    undefined.write_bytes(b"MESSAGE\nx-bad:tab\\there\n\n\0")
    assert run(capsys, "decode", str(undefined))[0] == 1
    status, out, _ = run(capsys, "decode", "--keep-undefined-escapes", str(undefined))
    assert status == 0 and "  x-bad: tab\\there\n" in out  # the backslash is kept


def test_decode_shows_control_characters_escaped(twin, capsys, tmp_path):
    path = tmp_path / "lf.stomp"
    path.write_bytes(b"MESSAGE\nx:line1\\nline2\ny\\n:a\\\\nb\n\n\0")
    _, out, _ = run(capsys, "decode", str(path))
    # a real LF is shown as a quoted repr; a literal backslash as it is
    assert "  x: 'line1\\nline2'\n  'y\\n': a\\nb\n" in out


def test_decode_body_previews(twin, capsys, tmp_path):
    path = tmp_path / "bodies.stomp"
    text = "é" * 100
    path.write_bytes(
        fastframe.encode("MESSAGE", {"content-type": "text/plain"}, text.encode())
        + fastframe.encode("MESSAGE", {"content-type": "application/octet-stream"}, b"\xff\0" * 40)
    )
    _, out, _ = run(capsys, "decode", str(path))
    bodies = re.findall(r"^  body: .*$", out, re.M)
    binary_preview = repr(b"\xff\0" * 24)
    assert bodies == [f"  body: 200 bytes {'é' * 60!r}...", f"  body: 80 bytes {binary_preview}..."]


def test_decode_missing_file(twin, capsys, tmp_path):
    missing = tmp_path / "nope.stomp"
    status, out, err = run(capsys, "decode", str(missing))
    assert status == 1 and out == ""
    assert err.startswith(f"{missing}: ")


@pytest.mark.parametrize("argv", [[], ["decode"], ["decode", "x", "--chunk", "0"], ["decode", "x", "--version", "2.0"],
                                  ["sample", "x", "--frames", "-1"], ["bogus"]])  # fmt: skip
def test_bad_arguments_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "usage: fastframe" in capsys.readouterr().err


# --------------------------------------------------------------------------- sample, demo, info


def test_sample_writes_the_generated_stream(capsys, tmp_path):
    out_path = tmp_path / "out.stomp"
    status, out, _ = run(capsys, "sample", str(out_path), "--frames", "25", "--seed", "3")
    assert status == 0
    assert out_path.read_bytes() == archive.generate_stream(25, seed=3)
    assert out == f"wrote 25 frames ({out_path.stat().st_size} bytes, seed 3) to {out_path}\n"
    run(capsys, "sample", str(out_path), "--frames", "25", "--seed", "3", "--crlf")
    assert out_path.read_bytes() == archive.generate_stream(25, seed=3, crlf=True)


def test_sample_to_stdout(capsysbinary):
    assert cli.main(["sample", "-", "--frames", "5", "--seed", "9"]) == 0
    assert capsysbinary.readouterr().out == archive.generate_stream(5, seed=9)


def test_sample_unwritable(capsys, tmp_path):
    status, _, err = run(capsys, "sample", str(tmp_path / "no" / "such" / "dir.stomp"))
    assert status == 1 and "dir.stomp: " in err


def test_demo(twin, capsys):
    status, out, err = run(capsys, "demo", "--frames", "6", "--seed", "4")
    assert status == 0 and err == ""
    lines = out.splitlines()
    implementation = f"implementation: {twin.IMPLEMENTATION} {TWIN_NAMES[twin.IMPLEMENTATION]}"
    assert lines[0] == f"fastframe {fastframe.__version__} demo, {implementation}"
    size = len(archive.generate_stream(6, seed=4))
    assert re.fullmatch(rf"generated 6 frames \({size} bytes, seed 4\) in .*sample\.stomp", lines[1])
    assert len(FRAME_LINE.findall(out)) == 6
    assert SUMMARY.search(lines[-1]).group(1) == "6"
    # the temporary directory is gone afterwards
    assert not os.path.exists(lines[1].rsplit(" in ", 1)[1])


def test_info(twin, capsys):
    status, out, _ = run(capsys, "info")
    assert status == 0
    assert out.splitlines()[:2] == [
        f"fastframe {fastframe.__version__}",
        f"implementation: {twin.IMPLEMENTATION} " + TWIN_NAMES[twin.IMPLEMENTATION],
    ]
    assert "STOMP versions: 1.0, 1.1, 1.2" in out


def test_python_dash_m(tmp_path):
    """``python -m fastframe`` in a fresh interpreter, with the default twin."""
    env = dict(os.environ)
    # the fastframe this test imported: a source tree's src/, or an installed wheel's site-packages
    where = str(Path(fastframe.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [where, env.get("PYTHONPATH")]))
    env["PYTHONIOENCODING"] = "ascii"  # like a pipe on Windows: the listing's UTF-8 must not crash it
    result = subprocess.run(
        [sys.executable, "-m", "fastframe", "demo", "--frames", "3"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import fastframe; print(fastframe.IMPLEMENTATION)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert f"implementation: {probe.stdout.strip()} " in result.stdout.splitlines()[0]
    assert result.stdout.splitlines()[-1].startswith("summary: 3 frames (CONNECTED 1, MESSAGE 2)")
    assert "\\u" in result.stdout or "\\x" in result.stdout  # non-ASCII text shown escaped


# --------------------------------------------------------------------------- the sample generator


def test_sample_is_deterministic_and_seeded():
    assert archive.generate_stream(50, seed=1) == archive.generate_stream(50, seed=1)
    assert archive.generate_stream(50, seed=1) != archive.generate_stream(50, seed=2)
    # a longer stream starts with the shorter one
    assert archive.generate_stream(80, seed=5).startswith(archive.generate_stream(30, seed=5))
    assert archive.generate_stream(0) == b""


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_sample_rejects_bad_counts(bad):
    with pytest.raises(ValueError):
        archive.generate_stream(bad)


def test_sample_stream_content(codec):
    data = archive.generate_stream(400, seed=11)
    decoder = codec.Decoder("1.2", strict=True)
    frames = decoder.feed(data)
    decoder.close()
    assert len(frames) == 400
    assert frames[0].command == "CONNECTED" and frames[0].get("version") == "1.2"
    assert {f.command for f in frames[1:]} == {"MESSAGE"}
    # every frame ends with NUL + EOL, and some idle heart-beats come on top
    assert decoder.heartbeats > len(frames)
    messages = frames[1:]
    types = {f.get("content-type") for f in messages}
    assert {"application/json", "text/plain;charset=utf-8", "application/octet-stream", None} <= types
    assert any(b"\0" in f.body for f in messages)
    without_length = [f for f in messages if f.get("content-length") is None]
    assert any(f.body for f in without_length) and any(not f.body for f in without_length)
    assert all(b"\0" not in f.body for f in without_length)
    assert any(f.body.startswith(b"\n") for f in without_length)
    assert any(":" in f.get("x-time", "") for f in messages)  # escaped as \c on the wire
    assert b"x-time:" in data and re.search(rb"x-time:\d\d\\c\d\d\\c\d\d\n", data)
    for frame in frames:
        assert frame_problems(frame, "1.2", "server") == []


def test_sample_crlf_changes_only_the_line_ends(codec):
    lf = archive.generate_stream(200, seed=3)
    crlf = archive.generate_stream(200, seed=3, crlf=True)
    assert crlf.count(b"\r\n") > 200
    assert codec.decode(crlf, strict=True) == codec.decode(lf, strict=True)
    heads = [part.split(b"\r\n\r\n")[0] for part in crlf.split(b"\0")[:-1] if b"MESSAGE" in part]
    assert heads and all(b"\n" not in head.replace(b"\r\n", b"") for head in heads)
