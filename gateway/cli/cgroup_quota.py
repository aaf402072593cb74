"""A fixed CPU budget per process on one machine: a Linux cgroup with a CFS quota (as root).

`gateway bench-cluster --voice` puts each member process in its own group limited to
`--member-cpu` cores, so that 1, 2 or 3 members on one shared machine each get the budget a
small machine of its own would give it, whatever the others do. cgroup v1 (a `cpu` hierarchy:
`cpu.cfs_quota_us` / `cpu.cfs_period_us`, `cgroup.procs`, `cpu.stat` throttled_time in ns) and
cgroup v2 (`cpu` in `cgroup.controllers`: `cpu.max` "quota period", `cpu.stat` throttled_usec)
are found from the mount table. `cpu_controller()` raises CgroupUnavailable saying why where
neither is writable (not root, a container without its own cgroup, ...). A process put into a
group is moved with all its threads; a group is removed once its processes have ended.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PERIOD_US = 100_000


class CgroupUnavailable(RuntimeError):
    """No writable cpu controller here; the message says why."""


@dataclass(frozen=True)
class CpuGroup:
    path: Path
    version: int  # 1 or 2
    cores: float

    def add(self, pid: int) -> None:
        """Move process `pid` (all its threads) into this group."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def quota(self) -> tuple[int, int]:
        """(quota, period) in microseconds as the kernel holds them; quota -1: unlimited."""
        if self.version == 1:
            return (int((self.path / "cpu.cfs_quota_us").read_text()),
                    int((self.path / "cpu.cfs_period_us").read_text()))
        quota, period = (self.path / "cpu.max").read_text().split()
        return (-1 if quota == "max" else int(quota)), int(period)

    def weight(self) -> float:
        """The group's CPU weight, in times the default."""
        if self.version == 1:
            return int((self.path / "cpu.shares").read_text()) / 1024
        return int((self.path / "cpu.weight").read_text()) / 100

    def throttled_s(self) -> float:
        """Seconds the group's threads waited, over its life, because its quota was spent."""
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines() if line.strip())
        if self.version == 1:
            return int(stat.get("throttled_time", 0)) / 1e9
        return int(stat.get("throttled_usec", 0)) / 1e6

    def remove(self) -> None:
        """Remove the (empty) group; a group still holding a process is left, and that is said."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise CgroupUnavailable(f"cannot remove {self.path} ({exc.strerror}): still has {self.pids()}") from None


@dataclass(frozen=True)
class CpuController:
    root: Path  # where new groups go
    version: int

    def group(self, name: str, cores: float, weight: float = 1.0) -> CpuGroup:
        """A new group `name` limited to `cores` CPUs (0.5: half of one core's time per period),
        with `weight` times the default CPU weight (v1 cpu.shares 1024, v2 cpu.weight 100). A group
        competes with the processes outside it as one process does: on a machine with a load of 8,
        all its threads together get about one ninth of the cores at weight 1, so a quota alone is a
        ceiling, not a budget; a higher weight lets the group reach its quota (and no more)."""
        if cores <= 0:
            raise ValueError(f"a CPU quota must be above 0 cores, got {cores}")
        if weight <= 0:
            raise ValueError(f"a CPU weight must be above 0, got {weight}")
        path = self.root / name
        try:
            path.mkdir()
        except FileExistsError:  # left by an earlier run that was killed: reuse it
            pass
        quota = max(1000, round(cores * PERIOD_US))
        if self.version == 1:
            (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            (path / "cpu.shares").write_text(f"{max(2, round(1024 * weight))}\n")
        else:
            (path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
            (path / "cpu.weight").write_text(f"{min(10000, max(1, round(100 * weight)))}\n")
        return CpuGroup(path, self.version, cores)


def _mounts(mounts_text: str) -> list[tuple[str, str, set[str]]]:
    """(fstype, mount point, options) of each cgroup mount in /proc/self/mounts' text."""
    found = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[2], parts[1].replace("\\040", " "), set(parts[3].split(","))))
    return found


def cpu_controller(mounts_text: str | None = None) -> CpuController:
    """The writable cpu controller of this machine (cgroup v1 first, then v2), or CgroupUnavailable
    naming what was found and why it cannot be used."""
    if mounts_text is None:
        mounts_text = Path("/proc/self/mounts").read_text()
    reasons: list[str] = []
    for fstype, point, options in _mounts(mounts_text):
        root = Path(point)
        if fstype == "cgroup" and "cpu" in options:
            if not (root / "cpu.cfs_quota_us").exists():
                reasons.append(f"{root}: a cgroup v1 cpu hierarchy without cpu.cfs_quota_us (no CFS bandwidth control)")
            elif not os.access(root, os.W_OK):
                reasons.append(f"{root}: cgroup v1 cpu, not writable by uid {os.getuid()} (run as root)")
            else:
                return CpuController(root, 1)
        elif fstype == "cgroup2":
            controllers = (root / "cgroup.controllers").read_text().split() if (root / "cgroup.controllers").exists() else []
            if "cpu" not in controllers:
                reasons.append(f"{root}: cgroup v2 without the cpu controller (cgroup.controllers: "
                               f"{' '.join(controllers) or 'none'})")
                continue
            if not os.access(root, os.W_OK):
                reasons.append(f"{root}: cgroup v2 cpu, not writable by uid {os.getuid()} (run as root)")
                continue
            try:  # the children need cpu enabled in the subtree
                if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
                    (root / "cgroup.subtree_control").write_text("+cpu\n")
            except OSError as exc:
                reasons.append(f"{root}: cgroup v2 cpu, cannot enable it for child groups ({exc.strerror}: this "
                               "cgroup holds processes itself, as inside a container)")
                continue
            return CpuController(root, 2)
    if not reasons:
        reasons.append("no cgroup file system is mounted (/proc/self/mounts)")
    raise CgroupUnavailable("no writable cpu controller for CPU quotas: " + "; ".join(reasons))


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) process `pid` has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_waiting_s(pid: int) -> float:
    """Seconds the threads of process `pid` alive now have spent runnable but not running, summed
    over the threads (/proc/PID/task/*/schedstat: so it may exceed the wall time): the time the
    quota held their group back (`CpuGroup.throttled_s`, counted once per waiting thread) and the
    time the machine's other work and the process's own other threads had the cores."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):  # the thread ended, or no schedstats in this kernel
            continue
    return total / 1e9
