"""The embedded MQTT broker: Debian's mosquitto, run and supervised by the gateway.

`start` writes the config, password file and ACL (gateway/links/mosquitto_files.py) into the
broker folder and starts `mosquitto -c`; `supervise` forwards its log lines into the gateway's
log, restarts it with a back-off when it dies, and rewrites the password file and ACL and sends
SIGHUP when the device registry changes (polled: `gateway devices add` runs in another process);
`stop` ends it with SIGTERM (it saves its persistent sessions). MQTT 5 and 3.1.1.
"""

from __future__ import annotations

import asyncio
import ctypes
import getpass
import logging
import os
import secrets
import shutil
import signal
import socket
from pathlib import Path

from gateway.devices.broker_password import mosquitto_hash
from gateway.links.base import BrokerLogins
from gateway.links.mosquitto_log import BrokerLog
from gateway.links.mosquitto_files import (BrokerSettings, deny_pattern, render_acl, render_config, render_passwd,
                                           usable_login)

log = logging.getLogger(__name__)

INSTALL_HINT = "the embedded MQTT broker is Debian's mosquitto: install it with `sudo apt install mosquitto`"
RESTART_FIRST_S = 0.5
NAMES_LOGGED = 10  # device ids named in a reload's log line; the rest are counted
RESTART_MAX_S = 30.0
START_TIMEOUT_S = 10.0


PR_SET_PDEATHSIG = 1


def _die_with_the_gateway() -> None:
    """In the child before exec: SIGTERM when the gateway dies, even by kill -9, so no orphaned
    mosquitto keeps mqtt.port from the next start (Linux prctl)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class MosquittoMissing(Exception):
    """mosquitto is not installed; str() says what to install."""


def find_mosquitto() -> str | None:
    found = shutil.which("mosquitto")
    if found is None and os.access("/usr/sbin/mosquitto", os.X_OK):  # not on a normal user's PATH
        found = "/usr/sbin/mosquitto"
    return found


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host or "0.0.0.0", 0))
        return s.getsockname()[1]


class MosquittoBroker:
    def __init__(self, folder: Path, host: str, port: int, prefix: str, max_packet_size: int,
                 logins: BrokerLogins, open_enrolment: bool, poll_s: float = 2.0) -> None:
        self.folder = folder
        self.host, self.port = host, port
        self.prefix = prefix
        self.max_packet_size = max_packet_size
        self.open_enrolment = open_enrolment
        self._logins = logins
        self._poll_s = poll_s
        self.gateway_user = ""
        self.gateway_password = secrets.token_urlsafe(24)
        self._gateway_hash = mosquitto_hash(self.gateway_password)
        self._registry: list[tuple[str, str | None]] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._stopping = False
        self.restarts = 0
        self.reloads = 0
        self._log = BrokerLog(prefix, open_enrolment)
        self._reloaded = asyncio.Event()
        self._deny_patterns: frozenset[str] = frozenset()  # the ACL's `pattern deny` topics (open enrolment)

    # ---- files ----------------------------------------------------------------------------------
    def _settings(self) -> BrokerSettings:
        return BrokerSettings(self.host, self.port, self.prefix, self.max_packet_size, self.open_enrolment,
                              self.gateway_user, self.folder, getpass.getuser())

    def _gateway_login(self) -> str:
        """The gateway's username (= its client id): random, kept so its persistent session stays."""
        path = self.folder / "gateway-user"
        if path.is_file() and (name := path.read_text().strip()):
            return name
        name = f"edge-gateway-{secrets.token_hex(8)}"
        path.write_text(name + "\n")
        return name

    def _write_logins(self) -> None:
        registered = [device_id for device_id, _ in self._registry]
        self._deny_patterns = frozenset(deny_pattern(self.prefix, device_id) for device_id in registered)
        self._log.logins(self.gateway_user, registered)
        for name, text in (("passwd", render_passwd(self.gateway_user, self._gateway_hash, self._registry)),
                           ("acl", render_acl(self._settings(), registered))):
            tmp = self.folder / f"{name}.new"
            tmp.write_text(text)
            tmp.chmod(0o600)
            tmp.replace(self.folder / name)

    def _write_all(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        self.gateway_user = self._gateway_login()
        if self.port == 0:  # tests, benchmarks: any free port
            self.port = _free_port(self.host)
        self._write_logins()
        conf = self.folder / "mosquitto.conf"
        conf.write_text(render_config(self._settings()))

    # ---- process --------------------------------------------------------------------------------
    async def start(self) -> None:
        """Write the files and start mosquitto; raises MosquittoMissing, or OSError when it cannot listen."""
        executable = find_mosquitto()
        if executable is None:
            raise MosquittoMissing(INSTALL_HINT)
        self._registry = await self._logins()
        self._warn_old_tokens(self._registry)
        await asyncio.to_thread(self._write_all)
        await self._spawn(executable)
        log.info("mqtt broker (embedded mosquitto) listening on %s:%d, enrolment %s", self.host or "*", self.port,
                 "open (anonymous clients confined to their own client id's topics)" if self.open_enrolment
                 else "closed (registered devices only)")

    async def _spawn(self, executable: str) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            executable, "-c", str(self.folder / "mosquitto.conf"), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, preexec_fn=_die_with_the_gateway)
        assert self._proc.stderr is not None
        said: list[str] = []
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while raw := await self._proc.stderr.readline():
                    line = raw.decode("utf-8", "replace").strip()
                    said.append(line)
                    if line.endswith(" running"):  # "mosquitto version 2.0.11 running"
                        return
        except TimeoutError:
            pass
        except BaseException:  # cancelled while starting: do not leave it running
            await self._end_process()
            raise
        await self._end_process()
        text = " / ".join(said[-3:]) or "no output"
        if "Address already in use" in text:
            raise OSError(98, f"port {self.port} is in use ({text})")
        raise OSError(f"mosquitto did not start: {text}")

    async def _end_process(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()  # SIGTERM: mosquitto saves its persistent sessions
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    async def supervise(self) -> None:
        """Forward the log, restart mosquitto when it dies, reload the logins; until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._watch_registry(), name="mosquitto-registry")
            delay = RESTART_FIRST_S
            while True:
                proc = self._proc
                assert proc is not None and proc.stderr is not None
                started = asyncio.get_running_loop().time()
                while line := await proc.stderr.readline():
                    self._forward(line.decode("utf-8", "replace").rstrip())
                code = await proc.wait()
                if asyncio.get_running_loop().time() - started > 60:
                    delay = RESTART_FIRST_S
                log.error("mqtt broker: mosquitto exited (code %s); restarting it in %.1f s", code, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RESTART_MAX_S)
                executable = find_mosquitto()
                if executable is None:
                    log.error("mqtt broker: %s", INSTALL_HINT)
                    continue
                try:
                    await asyncio.to_thread(self._write_logins)
                    await self._spawn(executable)
                except OSError as exc:
                    log.error("mqtt broker: mosquitto did not start again: %s", exc)
                    self._proc = proc  # its log pipe is at its end: the loop waits and tries again
                    continue
                self.restarts += 1
                log.info("mqtt broker: mosquitto restarted (%d so far)", self.restarts)

    async def _watch_registry(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            try:
                await self.reload()
            except Exception as exc:  # a locked or broken database: keep the last logins
                log.warning("mqtt broker: cannot read the device registry (%s); logins unchanged", exc)

    async def reload(self) -> bool:
        """Read the registry now; when it changed, rewrite the password file and ACL and SIGHUP
        mosquitto (which re-reads both). True when it changed."""
        logins = await self._logins()
        if logins == self._registry:
            return False
        added = sorted({d for d, _ in logins} - {d for d, _ in self._registry})
        removed = sorted({d for d, _ in self._registry} - {d for d, _ in logins})
        self._warn_old_tokens([row for row in logins if row not in self._registry])
        self._registry = logins
        await asyncio.to_thread(self._write_logins)
        if self._proc is not None and self._proc.returncode is None:
            self._reloaded.clear()
            self._proc.send_signal(signal.SIGHUP)
            try:  # "Reloading config.": logins after it are checked against the new files
                await asyncio.wait_for(self._reloaded.wait(), 5)
            except TimeoutError:
                log.warning("mqtt broker: mosquitto did not say it reloaded its logins within 5 s")
        self.reloads += 1
        log.info("mqtt broker: device logins reloaded (%d devices; added %s, removed %s, others changed token)",
                 len(logins), _names(added), _names(removed))
        return True

    def _warn_old_tokens(self, rows: list[tuple[str, str | None]]) -> None:
        for device_id, hashed in rows:
            if not usable_login(device_id):
                log.warning("mqtt broker: device %s cannot log in to the embedded mosquitto: its password file "
                            "takes no ':' in a username (use another device id for MQTT)", device_id)
            elif hashed is None:
                log.warning("mqtt broker: device %s has a token from before the embedded mosquitto, which cannot "
                            "check it: give it a new one with `gateway devices add %s` to use MQTT",
                            device_id, device_id)

    def _forward(self, line: str) -> None:
        if not line:
            return
        if line == "Reloading config.":
            self._reloaded.set()
        if self._own_deny_pattern(line):  # one per registered device at each load: expected, not news
            log.debug("mqtt broker: %s", line)
            return
        level, text = self._log.line(line)
        log.log(level, "mqtt broker: %s", text)

    def _own_deny_pattern(self, line: str) -> bool:
        """mosquitto's warning about one of the ACL's `pattern deny <prefix>/<id>/#` lines (they
        have no %c or %u on purpose: gateway/links/mosquitto_files.py)."""
        head, tail = "Warning: ACL pattern '", "' does not contain '%c' or '%u'."
        if not (line.startswith(head) and line.endswith(tail)):
            return False
        return line[len(head):-len(tail)] in self._deny_patterns

    async def stop(self) -> None:
        await self._end_process()


def _names(ids: list[str]) -> str:
    """Device ids for a log line: at most NAMES_LOGGED of them, then how many more."""
    if not ids:
        return "none"
    more = f" and {len(ids) - NAMES_LOGGED} more" if len(ids) > NAMES_LOGGED else ""
    return ", ".join(ids[:NAMES_LOGGED]) + more
