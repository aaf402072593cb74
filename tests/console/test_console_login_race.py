"""Concurrent console logins cannot race the throttle: a password check is counted before it runs,
and the checks running at once are bounded per address and in all (gateway/console/throttle.py),
also when the peer that asked went away. Real HTTP requests from several loopback addresses: to the
gateway as `gateway run` builds it, and to a ConsoleServer whose password check the test holds."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.app import Gateway
from gateway.app_links import default_links
from gateway.config import parse_config
from gateway.console.password import PasswordFile
from gateway.console.server import ConsoleServer
from gateway.console.sessions import Sessions
from gateway.console.throttle import TOTAL_CHECKS, LoginThrottle
from gateway.engines.runner import EngineRunner
from gateway.links.web import TextSocket, WebServer
from gateway.screens.server import ScreensServer
from tests.clock import Clock
from tests.console.conftest import PASSWORD, Client

ROOT = Path(__file__).resolve().parents[2]


async def test_sixty_concurrent_wrong_passwords_check_no_more_than_the_limit(tmp_path: Path,
                                                                             fake_runner: EngineRunner) -> None:
    PasswordFile(tmp_path / "console-password").set(PASSWORD)
    cfg = parse_config({"mqtt": {"enabled": False}, "coap": {"enabled": False}, "xiaozhi": {"enabled": False},
                        "screens": {"host": "127.0.0.1", "port": 0, "tls": False, "access_key": str(tmp_path / "key")},
                        "server": {"host": "127.0.0.1", "websocket_port": 0},
                        "console": {"password_file": str(tmp_path / "console-password"), "max_failed_logins": 5},
                        "devices": {"database": str(tmp_path / "gateway.db")}}, ROOT)
    links = default_links(cfg)
    (screens,) = [link for link in links if isinstance(link, ScreensServer)]
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, fake_runner, links).serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        host = f"127.0.0.1:{screens.port}"
        answers = await asyncio.gather(*(Client(host, local="127.0.0.2").login(f"guess-{i}") for i in range(60)))
        statuses = [a.status for a in answers]
        assert set(statuses) <= {401, 429} and 1 <= statuses.count(401) <= 5, statuses
        throttled = next(a for a in answers if a.status == 429)
        assert int(throttled.headers["retry-after"]) >= 1 and "try again in" in throttled.json()["message"]
        for i in range(5 - statuses.count(401)):  # the rest of the allowance, one at a time
            assert (await Client(host, local="127.0.0.2").login(f"later-{i}")).status == 401
        assert (await Client(host, local="127.0.0.2").login()).status == 429  # locked out: even the right one
        assert (await Client(host, local="127.0.0.3").login()).status == 200  # another address is not
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class HeldPassword(PasswordFile):
    """The password file with its check held until `release` (a test's scrypt that takes its time)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()
        self.entered = asyncio.Queue[None]()
        self._loop = asyncio.get_running_loop()

    def verify(self, password: str) -> bool:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self._loop.call_soon_threadsafe(self.entered.put_nowait, None)
        try:
            self.release.wait(60)  # a bound against a hang only
            return super().verify(password)
        finally:
            with self._lock:
                self.running -= 1


@asynccontextmanager
async def held_console(tmp_path: Path, max_failures: int = 5) -> AsyncIterator[tuple[str, HeldPassword, LoginThrottle]]:
    password = HeldPassword(tmp_path / "console-password")
    password.set(PASSWORD)
    throttle = LoginThrottle(max_failures)
    console = ConsoleServer(password, Sessions(3600), throttle, {}, tls_available=False)

    async def no_screen(sock: TextSocket) -> None:
        pass

    server = WebServer("127.0.0.1", 0, "/screen", lambda path, query, peer: None, no_screen)
    ready = asyncio.Event()
    task = asyncio.create_task(server.serve(None, ready, console))
    try:
        await asyncio.wait_for(ready.wait(), 30)
        yield f"127.0.0.1:{server.port}", password, throttle
    finally:
        password.release.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_password_checks_running_at_once_are_bounded_for_all_addresses(tmp_path: Path) -> None:
    async with held_console(tmp_path) as (host, password, _):
        logins = [asyncio.create_task(Client(host, local=f"127.0.0.{10 + i}").login("wrong password"))
                  for i in range(10)]
        for _ in range(TOTAL_CHECKS):
            await asyncio.wait_for(password.entered.get(), 30)
        done: set[asyncio.Task] = set()
        pending = set(logins)
        while len(done) < 10 - TOTAL_CHECKS:  # the others are answered while the checks are held
            more, pending = await asyncio.wait(pending, timeout=60, return_when=asyncio.FIRST_COMPLETED)
            assert more, "a login beyond the bound waited for the checks"
            done |= more
        assert sorted(t.result().status for t in done) == [503] * (10 - TOTAL_CHECKS)
        assert "try again in 1 s" in next(iter(done)).result().json()["message"]
        password.release.set()
        assert sorted(a.status for a in await asyncio.gather(*pending)) == [401] * TOTAL_CHECKS
        assert password.most == TOTAL_CHECKS


async def test_a_check_whose_peer_went_away_holds_its_place_and_still_counts(tmp_path: Path) -> None:
    async with held_console(tmp_path, max_failures=1) as (host, password, throttle):
        for i in range(TOTAL_CHECKS):  # ask, and hang up while the password is being checked
            reader, writer = await asyncio.open_connection("127.0.0.1", int(host.split(":")[1]),
                                                           local_addr=(f"127.0.0.{20 + i}", 0))
            body = b'{"password": "wrong password"}'
            writer.write(f"POST /console/api/login HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            await asyncio.wait_for(password.entered.get(), 30)
            writer.close()
        busy = await Client(host, local="127.0.0.30").login()
        assert busy.status == 503  # the abandoned checks still run: they hold their places
        password.release.set()
        async with asyncio.timeout(60):  # the abandoned checks end: each counted as it ends
            while not all(throttle.retry_after(f"127.0.0.{20 + i}") > 0 for i in range(TOTAL_CHECKS)):
                await asyncio.sleep(0.05)
        # the abandoned wrong passwords were counted: with max_failed_logins 1, those addresses wait
        locked = await Client(host, local="127.0.0.20").login()
        assert locked.status == 429 and locked.json()["message"].startswith("too many wrong passwords")
        assert (await Client(host, local="127.0.0.30").login()).status == 200


def test_a_reserved_check_counts_against_the_tries_left() -> None:
    throttle = LoginThrottle(3, Clock(), per_peer=5, total=10)
    assert throttle.begin("10.0.0.9") is None and throttle.begin("10.0.0.9") is None
    assert throttle.begin("10.0.0.9") is None
    refusal = throttle.begin("10.0.0.9")  # three tries, three running
    assert refusal is not None and refusal.status == 429
    for _ in range(3):
        throttle.end("10.0.0.9")
        throttle.failed("10.0.0.9")
    locked = throttle.begin("10.0.0.9")
    assert locked is not None and locked.wait_s == 60 and locked.why == "too many wrong passwords"
    assert throttle.begin("10.0.0.8") is None  # per address
