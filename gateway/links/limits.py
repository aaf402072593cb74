"""Limits that hold under abuse, per peer address, for the links that know where a peer connects
from (WebSocket, CoAP): one `PeerLimits` per gateway, shared by those links (gateway/app.py); the
MQTT link shares its session count (a broker hides the devices' addresses).

- Sessions: at most `max_sessions` sessions in total (WebSocket, CoAP, MQTT) and
  `max_sessions_per_peer` from one address (pre-Hello connections count too, so a flood from one machine cannot hold every slot
  or exhaust the file descriptors); the link refuses the rest with `too-many-sessions`.
- Failed logins (a Hello answered `auth-failed`): each one locks the address out of logging in
  for `login_backoff_s`, doubling per further failure up to `login_backoff_max_s`; a Hello in the
  lock-out is answered `auth-throttled` without its token being checked. Other addresses are not
  affected; an address that stays quiet for `login_backoff_max_s` after its lock-out is forgiven.
- Readings: a token bucket of `readings_per_minute_per_peer` per address on top of the
  per-device limit (gateway/devices/readings.py), so rotating device ids does not bypass it.

`GuardedConnection` applies the login and reading limits to one connection; the session code
(gateway/devices/session.py) sees a throttled Hello as a protocol error, which it logs and
answers like any other. `LogThrottle` keeps a flood from flooding the log: one line per reason
and interval, the next one says how many were left out.
"""

from __future__ import annotations

import errno
import logging
import resource
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from firmware_protocol import Error, Hello, Message, ProtocolError, ReadingAck, ReadingStatus, SensorReading
from gateway.links.base import DeviceConnection, Roaming

log = logging.getLogger(__name__)

LOG_INTERVAL_S = 10.0  # one log line per reason and peer address in this time
MAX_TRACKED_ADDRESSES = 4096  # per-address state kept (login failures, reading buckets); oldest forgotten


class LogThrottle:
    """At most one line per key per interval; the next line after a quiet spell counts the rest."""

    def __init__(self, logger: logging.Logger, interval_s: float = LOG_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log, self._interval, self._clock = logger, interval_s, clock
        self._seen: OrderedDict[object, tuple[float, int]] = OrderedDict()  # key -> (last logged, left out)

    def warning(self, key: object, msg: str, *args: Any) -> bool:
        """Log `msg % args` unless `key` was logged less than an interval ago; True if logged."""
        now = self._clock()
        last, left_out = self._seen.get(key, (float("-inf"), 0))
        if now - last < self._interval:
            self._seen[key] = (last, left_out + 1)
            return False
        self._seen[key] = (now, 0)
        self._seen.move_to_end(key)
        while len(self._seen) > MAX_TRACKED_ADDRESSES:
            self._seen.popitem(last=False)
        if left_out:
            msg += f" (and {left_out} more like it in the last {now - last:.0f} s)"
        self._log.warning(msg, *args)
        return True


@dataclass
class _Logins:
    failures: int = 0
    locked_until: float = 0.0


@dataclass
class _Bucket:
    tokens: float
    at: float


class PeerLimits:
    def __init__(self, max_sessions: int = 64, max_sessions_per_peer: int = 8, login_backoff_s: float = 1.0,
                 login_backoff_max_s: float = 60.0, readings_per_minute_per_peer: int = 600,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions, self.max_sessions_per_peer = max_sessions, max_sessions_per_peer
        self.login_backoff_s, self.login_backoff_max_s = login_backoff_s, login_backoff_max_s
        self.readings_per_minute = readings_per_minute_per_peer  # 0: no per-address limit
        self._clock = clock
        self.sessions = 0
        self._per_peer: dict[str, int] = {}
        self._logins: OrderedDict[str, _Logins] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    # --- sessions -----------------------------------------------------------------------------
    def admit(self, address: str | None) -> str | None:
        """Take a session slot for a new connection from `address` (None: a link that does not
        know it, MQTT: only the total counts); None when taken, else why not (then nothing was
        taken). Every admitted connection is `release`d with the same address when it ends."""
        here = self._per_peer.get(address, 0) if address is not None else 0
        if address is not None and here >= self.max_sessions_per_peer:
            return (f"{here} sessions from {address} already (server.max_sessions_per_peer "
                    f"{self.max_sessions_per_peer}); close one and retry")
        if self.sessions >= self.max_sessions:
            return f"the gateway serves its maximum of {self.max_sessions} sessions (server.max_sessions); retry later"
        if address is not None:
            self._per_peer[address] = here + 1
        self.sessions += 1
        return None

    def release(self, address: str | None) -> None:
        if address is not None:
            left = self._per_peer.get(address, 0) - 1
            if left > 0:
                self._per_peer[address] = left
            else:
                self._per_peer.pop(address, None)
        self.sessions = max(0, self.sessions - 1)

    # --- logins -------------------------------------------------------------------------------
    def login_wait(self, address: str) -> float:
        """Seconds until `address` may try to log in again (0: now)."""
        state = self._logins.get(address)
        if state is None:
            return 0.0
        now = self._clock()
        if now >= state.locked_until + self.login_backoff_max_s:  # quiet long enough: forgiven
            del self._logins[address]
            return 0.0
        return max(0.0, state.locked_until - now)

    def login_failed(self, address: str) -> float:
        """Count a failed login from `address`; returns the lock-out it now has, in seconds."""
        state = self._logins.pop(address, None) or _Logins()
        self._logins[address] = state  # most recent last: the oldest are forgotten first
        while len(self._logins) > MAX_TRACKED_ADDRESSES:
            self._logins.popitem(last=False)
        state.failures += 1
        delay = min(self.login_backoff_max_s, self.login_backoff_s * 2 ** (state.failures - 1))
        state.locked_until = self._clock() + delay
        return delay

    # --- readings -----------------------------------------------------------------------------
    def take_reading(self, address: str) -> bool:
        """One reading from `address` may be stored (its bucket had a token)."""
        if not self.readings_per_minute:
            return True
        now, full = self._clock(), float(self.readings_per_minute)
        bucket = self._buckets.pop(address, None) or _Bucket(full, now)
        self._buckets[address] = bucket
        while len(self._buckets) > MAX_TRACKED_ADDRESSES:
            self._buckets.popitem(last=False)
        bucket.tokens = min(full, bucket.tokens + (now - bucket.at) * full / 60)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True


class GuardedConnection(Roaming):
    """A device connection from `address` with the per-address login and reading limits (the
    WebSocket and CoAP links': both roam in a cluster)."""

    def __init__(self, conn: DeviceConnection, address: str, limits: PeerLimits, throttle: LogThrottle) -> None:
        self.peer = conn.peer
        self._conn, self._address, self._limits, self._throttle = conn, address, limits, throttle

    async def receive(self) -> Message | ProtocolError:
        while True:
            msg = await self._conn.receive()
            if isinstance(msg, Hello) and (wait := self._limits.login_wait(self._address)) > 0:
                return ProtocolError("auth-throttled", f"too many failed logins from {self._address}; "
                                                       f"retry in {wait:.1f} s (the token was not checked)")
            if isinstance(msg, SensorReading) and not self._limits.take_reading(self._address):
                per_minute = self._limits.readings_per_minute
                self._throttle.warning(("readings", self._address),
                                       "%s: rate-limited: reading seq %d refused (limit %d per minute for all "
                                       "devices at %s, devices.max_readings_per_minute_per_peer)",
                                       self.peer, msg.seq, per_minute, self._address)
                await self._conn.send(ReadingAck(msg.seq, ReadingStatus.REJECTED, "rate-limited",
                                                 f"more than {per_minute} readings per minute from {self._address}; "
                                                 "resend later"))
                continue
            return msg

    async def send(self, message: Message) -> None:
        if isinstance(message, Error) and message.code == "auth-failed":
            delay = self._limits.login_failed(self._address)
            self._throttle.warning(("login", self._address), "%s: failed login from %s: its next login is "
                                   "accepted in %.1f s at the earliest", self.peer, self._address, delay)
        await self._conn.send(message)

    async def close(self, reason: str = "") -> None:
        await self._conn.close(reason)

    async def lease_lost(self, text: str) -> None:
        if isinstance(self._conn, Roaming):
            await self._conn.lease_lost(text)
        else:  # an endpoint's connection that does not roam: its own close (xiaozhi boxes roam)
            await self._conn.close(f"lease-lost: {text}")


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft limit of open files to the hard limit (a gateway holds one per connection;
    1,024 is a common default); logs the outcome. Returns the (old, new) soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target <= soft:
        log.info("open files limit %d (the hard limit)", soft)
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("open files limit stays %d: cannot raise it to %d (%s)", soft, target, exc)
        return soft, soft
    log.info("open files limit raised from %d to %d (the hard limit)", soft, target)
    return soft, target


_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def throttle_accept_errors(loop: Any, interval_s: float = LOG_INTERVAL_S) -> None:
    """Log asyncio's "socket.accept() out of system resource" (EMFILE: no file descriptor left;
    asyncio retries the accept a second later) once per interval, without a traceback; every other
    loop error goes to the handler that was there before."""
    previous = loop.get_exception_handler()
    throttle = LogThrottle(log, interval_s)

    def handler(loop_: Any, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _OUT_OF_RESOURCES and "accept" in context.get("message", ""):
            sock = context.get("socket")
            where = sock.getsockname() if sock is not None else "a listening socket"
            throttle.warning(("accept", exc.errno), "accept-failed on %s: %s; new connections wait until "
                             "connections close (open files limit %d)", where, exc.strerror,
                             resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            return
        if previous is not None:
            previous(loop_, context)
        else:
            loop_.default_exception_handler(context)

    loop.set_exception_handler(handler)
