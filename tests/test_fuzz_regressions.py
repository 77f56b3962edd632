"""Every saved fuzz finding, and the hand-made seeds, through every fuzz harness (no atheris needed).

A finding is kept as fuzz/regressions/<harness>-<what>.bin (the harness's raw input); this runs it
through that harness's checks, which assert behaviour: the same outcome whole and in pieces, both
twins alike, columns equal to frames, encode/decode round trips.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from conftest import compiled_twin

compiled_twin()  # the harnesses compare the twins: a skip for the whole module when absent by design

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
HARNESSES = ("decode", "diff", "columns", "encode")
CONTROLS = (bytes(8), bytes([1 | 3 << 6, 0x0F, 0, 0, 0, 0, 2, 0]), bytes([0x3F, 0xF5, 3, 20, 30, 40, 1, 9]))


def harness(name: str):
    if str(FUZZ) not in sys.path:
        sys.path.insert(0, str(FUZZ))
    return importlib.import_module(f"fuzz_{name}")


REGRESSIONS = [(path.name.split("-", 1)[0], path) for path in sorted((FUZZ / "regressions").glob("*.bin"))]
SEEDS = sorted((FUZZ / "seeds").glob("*.stomp"))


def test_saved_findings_pass() -> None:
    # one test over them all: no findings saved yet is not a skip
    for name, path in REGRESSIONS:
        harness(name).test_one_input(path.read_bytes())


@pytest.mark.parametrize("name", HARNESSES)
@pytest.mark.parametrize("seed", SEEDS, ids=[path.stem for path in SEEDS])
def test_hand_seeds_pass_every_harness(name: str, seed: Path) -> None:
    module = harness(name)
    for control in CONTROLS:
        module.test_one_input(control + seed.read_bytes())


def test_harnesses_catch_a_divergence(monkeypatch: pytest.MonkeyPatch) -> None:
    # the differential harness must fail when one twin's result differs
    diff = harness("diff")
    common = importlib.import_module("_common")
    real = common.outcome

    def skewed(module, data, cuts, options):
        result = real(module, data, cuts, options)
        return result + ("skew",) if module is common.C else result

    monkeypatch.setattr(diff, "outcome", skewed)
    with pytest.raises(AssertionError):
        diff.test_one_input(bytes(8) + b"SEND\n\n\0")
