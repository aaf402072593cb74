"""Several cluster members on one machine, for the cluster tests and `gateway bench-cluster`.

A plain mosquitto on a free loopback port stands for the site's external broker; each member is
a `gateway.cli.cluster_target` process (its own files, the shared PostgreSQL from `dsn`); the
emulated sensor boxes (gateway/cli/cluster_box.py) and a downlink observer
(gateway/links/mqtt_downlinks.py) run in the caller's event loop. `kill` sends a member SIGKILL
(its socket closes: the broker fires its Will), SIGSTOP (frozen: only the heartbeat timeout and
the lease expiry notice it) or SIGTERM (a clean leave). `restart_broker` stops a mosquitto and
starts it again on the same port (no persistence: it comes back empty, as a replaced broker
would); `start_broker("b", bridge_to="a")` starts a second mosquitto bridged to the first (an
MQTT 5 `connection` bridge forwarding `P/#` both ways, docs/SCALE-OUT.md "Across a bridge").
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gateway.cli.cluster_box import ClusterBox
from gateway.links.mosquitto import find_mosquitto
from gateway.links.mqtt_client import AsyncPaho
from gateway.links.mqtt_downlinks import DownlinkLog


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterRig:
    def __init__(self, root: Path, dsn: str, cluster: dict[str, Any] | None = None, prefix: str = "gw") -> None:
        self.root = root
        self.dsn = dsn
        self.cluster = cluster or {}
        self.prefix = prefix
        self.broker_port = 0  # broker "a"'s: the members', boxes' and observer's unless told otherwise
        self.brokers: dict[str, int] = {}  # name -> port
        self._broker_confs: dict[str, Path] = {}
        self._broker_procs: dict[str, subprocess.Popen[str]] = {}
        self.members: dict[str, subprocess.Popen[str]] = {}
        self.boxes: list[ClusterBox] = []
        self._box_tasks: list[asyncio.Task[None]] = []
        self.observer = DownlinkLog(prefix)
        self._observing = False

    def start_broker(self, name: str = "a", bridge_to: str | None = None) -> int:
        """Start mosquitto `name` on a free loopback port (bridged to broker `bridge_to`); its port."""
        port = _free_port()
        lines = [f"listener {port} 127.0.0.1", "allow_anonymous true", "persistence false",
                 f"user {getpass.getuser()}", "log_dest stderr", "log_type error", "log_type warning",
                 "max_queued_messages 10000"]
        if bridge_to is not None:
            lines += bridge_config(name, self.brokers[bridge_to], self.prefix)
        conf = self.root / f"mosquitto-{name}.conf"
        conf.write_text("\n".join(lines) + "\n")
        self.brokers[name] = port
        self._broker_confs[name] = conf
        self._spawn_broker(name)
        if name == "a":
            self.broker_port = port
        return port

    def _spawn_broker(self, name: str) -> None:
        program = find_mosquitto()
        if program is None:
            raise RuntimeError("needs mosquitto: sudo apt install mosquitto")
        port = self.brokers[name]
        self._broker_procs[name] = subprocess.Popen(
            [program, "-c", str(self._broker_confs[name])], text=True,
            stderr=(self.root / f"mosquitto-{name}.log").open("a"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto {name} did not start listening on {port} within 10 s")

    async def restart_broker(self, name: str = "a", down_s: float = 1.0) -> tuple[float, float]:
        """Stop broker `name` (SIGTERM: its clients see the connection close), wait `down_s`, start
        it again on the same port, empty; the monotonic times it stopped and listened again."""
        proc = self._broker_procs[name]
        proc.terminate()
        await asyncio.to_thread(proc.wait, 10)
        stopped = time.monotonic()
        await asyncio.sleep(down_s)
        await asyncio.to_thread(self._spawn_broker, name)
        return stopped, time.monotonic()

    async def wait_bridged(self, name: str, timeout: float = 15) -> None:
        """Until a publish on broker `name` reaches a subscriber on broker "a" (its bridge is up)."""
        topic = f"{self.prefix}/$cluster/bridge-probe/{name}"
        arrived = asyncio.Event()
        sub = AsyncPaho(f"probe-sub-{name}", lambda msg: arrived.set(), protocol="5", persistent=False)
        pub = AsyncPaho(f"probe-pub-{name}", lambda msg: None, protocol="5", persistent=False)
        await sub.connect("127.0.0.1", self.broker_port)
        await pub.connect("127.0.0.1", self.brokers[name])
        try:
            sub.subscribe(topic, 1)
            async with asyncio.timeout(timeout):
                while not arrived.is_set():
                    pub.publish(topic, b"probe", 1)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.3):
                            await arrived.wait()
        finally:
            await sub.disconnect()
            await pub.disconnect()

    async def start_members(self, ids: list[str], extra: dict[str, dict[str, Any]] | None = None) -> None:
        """Start the members (again, for one that was killed) and wait until each says `ready`;
        `extra`: more of a member's CONFIG_JSON (gateway/cli/cluster_target.py), by member id."""
        for member in ids:
            folder = self.root / member
            folder.mkdir(exist_ok=True)
            args = {"id": member, "broker_port": self.broker_port, "folder": str(folder), "cluster": self.cluster,
                    **(extra or {}).get(member, {})}
            self.members[member] = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli.cluster_target", json.dumps(args)], text=True,
                stdout=subprocess.PIPE, stderr=(folder / "gateway.log").open("a"),
                env={**os.environ, "GATEWAY_PG_DSN": self.dsn})
        for member in ids:
            proc = self.members[member]
            assert proc.stdout is not None
            line = await asyncio.to_thread(proc.stdout.readline)
            if line.strip() != "ready":
                raise RuntimeError(f"member {member} did not start: {self.log(member)[-2000:]}")

    def log(self, member: str) -> str:
        return (self.root / member / "gateway.log").read_text(errors="replace")

    async def wait_logged(self, member: str, text: str, count: int, timeout: float) -> None:
        """Until the member's log has `text` at least `count` times."""
        async with asyncio.timeout(timeout):
            while self.log(member).count(text) < count:
                await asyncio.sleep(0.1)

    async def observe(self) -> None:
        """Connect the downlink observer to broker "a" (once)."""
        if not self._observing:
            self._observing = True
            await self.observer.connect("127.0.0.1", self.broker_port)

    async def start_boxes(self, count: int, every_s: float = 0.5, prefix: str = "box", broker: str = "a") -> None:
        """`count` sensor boxes on broker `broker` (the observer listens on broker "a")."""
        await self.observe()
        for i in range(count):
            box = ClusterBox(f"{prefix}-{i:02d}", prefix=self.prefix, every_s=every_s)
            self.boxes.append(box)
            self._box_tasks.append(asyncio.create_task(box.run("127.0.0.1", self.brokers[broker]), name=box.device_id))

    async def wait_all_served(self, timeout: float, readings: int = 1) -> None:
        """Until every box has `readings` more acknowledged readings than now."""
        goal = {box.device_id: len(box.acked) + readings for box in self.boxes}
        async with asyncio.timeout(timeout):
            while any(len(box.acked) < goal[box.device_id] for box in self.boxes):
                await asyncio.sleep(0.05)

    def holders(self) -> dict[str, str | None]:
        now = time.monotonic()
        return {box.device_id: self.observer.holder_at(box.device_id, now) for box in self.boxes}

    def kill(self, member: str, sig: signal.Signals) -> float:
        """Signal a member; returns the monotonic time it was sent."""
        at = time.monotonic()
        self.members[member].send_signal(sig)
        return at

    async def failover(self, devices: list[str], after: float, gone: str, timeout: float) -> dict[str, float]:
        """Seconds from `after` to each device's first Welcome from another member (waits up to
        `timeout`; devices not served again by then are missing from the result)."""
        found: dict[str, float] = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(devices) and time.monotonic() < deadline:
            for device_id in devices:
                at = self.observer.first_welcome_after(device_id, after, gone)
                if at is not None:
                    found[device_id] = at - after
            await asyncio.sleep(0.05)
        return found

    async def stop(self) -> None:
        for task in self._box_tasks:
            task.cancel()
        await asyncio.gather(*self._box_tasks, return_exceptions=True)
        await self.observer.close()
        for proc in self.members.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.members.values():
            try:
                await asyncio.to_thread(proc.wait, 15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for proc in reversed(self._broker_procs.values()):  # the bridged ones first
            proc.terminate()
            await asyncio.to_thread(proc.wait, 10)


def bridge_config(name: str, remote_port: int, prefix: str) -> list[str]:
    """mosquitto.conf lines bridging this broker to the one on `remote_port` (docs/SCALE-OUT.md
    "Across a bridge"): MQTT 5 (user properties such as the lease tag and message expiry cross),
    every topic under the prefix both ways at QoS 1 (retained messages keep their flag), a
    reconnect within seconds when either side restarts."""
    return [f"connection bridge-{name}", f"address 127.0.0.1:{remote_port}", "bridge_protocol_version mqttv50",
            f"topic {prefix}/# both 1", "cleansession true", "try_private true", "restart_timeout 1 2",
            "keepalive_interval 10", f"remote_clientid bridge-{name}"]
