"""CPU caps for parts of a benchmark: cgroup v1 ``cpu`` cgroups with a quota, ``cpuacct`` ones that count.

This machine has 2 cores; a measurement that needs parts on cores of their own (the Workers of a
cluster, a broker on a machine of its own) caps each part instead. A group's quota is ``cores`` x
``cpu.cfs_period_us``, and its ``cpu.shares`` the highest, so that the cap is also what it gets on a
loaded machine (each process of the root cgroup weighs as much as a default cgroup: with a load
average of 7 a default group would get about an eighth of a core). Needs root and cgroup v1
(``/sys/fs/cgroup/cpu`` and ``/sys/fs/cgroup/cpuacct``); the groups are removed on exit, and the
processes put into them moved back first.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Tuple

CGROUPS = "/sys/fs/cgroup"
MAX_SHARES = 262144  # the kernel's ceiling for cpu.shares (the default is 1024)
KINDS = ("cpu", "cpuacct")


class CpuCaps:
    """``count`` groups, each capped at ``cores``; ``with CpuCaps(0.5, 2, "w", "--worker-cpu") as caps``."""

    def __init__(self, cores: float, count: int, label: str, option: str) -> None:
        self.cores, self.option = cores, option
        self.groups = [
            {kind: os.path.join(CGROUPS, kind, f"fastframe-bench-{os.getpid()}-{label}{i}") for kind in KINDS}
            for i in range(count)
        ]
        self.added: List[Tuple[int, int]] = []  # (group, pid) put in by add()

    def __enter__(self) -> CpuCaps:
        for kind in KINDS:
            if not os.path.isfile(os.path.join(CGROUPS, kind, "cgroup.procs")):
                raise SystemExit(f"{self.option} needs cgroup v1's {kind} controller at {CGROUPS}/{kind}")
        try:
            for group in self.groups:
                for path in group.values():
                    os.mkdir(path)
                period = int(read(group["cpu"], "cpu.cfs_period_us"))
                write(group["cpu"], "cpu.cfs_quota_us", str(round(self.cores * period)))
                write(group["cpu"], "cpu.shares", str(MAX_SHARES))
        except BaseException:
            self.__exit__()
            raise
        return self

    def prefix(self, i: int) -> List[str]:
        """A command prefix that enters group ``i`` and then runs the rest (for a process to start)."""
        script = 'echo $$ > "$1" && echo $$ > "$2" && shift 2 && exec "$@"'
        return ["sh", "-c", script, "sh", *(os.path.join(self.groups[i][kind], "cgroup.procs") for kind in KINDS)]

    def add(self, i: int, pid: int) -> None:
        """Put a running process (all its threads) into group ``i``; what it starts from now on goes too."""
        for kind in KINDS:
            write(self.groups[i][kind], "cgroup.procs", str(pid))
        self.added.append((i, pid))

    def usage(self) -> Dict[str, float]:
        """CPU seconds the groups used, their CFS periods and the periods throttled, summed."""
        total = {"cpu_s": 0.0, "periods": 0.0, "throttled": 0.0}
        for group in self.groups:
            total["cpu_s"] += int(read(group["cpuacct"], "cpuacct.usage")) / 1e9
            stat = dict(line.split() for line in read(group["cpu"], "cpu.stat").splitlines())
            total["periods"] += int(stat["nr_periods"])
            total["throttled"] += int(stat["nr_throttled"])
        return total

    def __exit__(self, *exc: Any) -> None:
        for _, pid in self.added:  # back to the root groups, at once
            for kind in KINDS:
                try:
                    write(os.path.join(CGROUPS, kind), "cgroup.procs", str(pid))
                except OSError:
                    pass  # it ended
        for group in self.groups:
            for kind, path in group.items():
                deadline = time.monotonic() + 15
                while os.path.isdir(path):
                    try:
                        os.rmdir(path)
                    except OSError:  # processes still in it: a killed JVM may take a moment; then moved out
                        if time.monotonic() > deadline:
                            for pid in read(path, "cgroup.procs").split():
                                write(os.path.join(CGROUPS, kind), "cgroup.procs", pid)
                        time.sleep(0.2)


def read(folder: str, name: str) -> str:
    with open(os.path.join(folder, name)) as f:
        return f.read().strip()


def write(folder: str, name: str, value: str) -> None:
    with open(os.path.join(folder, name), "w") as f:
        f.write(value)
