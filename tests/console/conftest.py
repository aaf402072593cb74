"""A running gateway (fake engines, real device database, real memory with its embedding model)
with its device WebSocket and the screen server that mounts the console, on 127.0.0.1 free ports;
the admin password is set as `gateway console password` sets it; and a small HTTP client."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest_asyncio

from gateway.app import Gateway
from gateway.config import GatewayConfig, parse_config
from gateway.console.password import PasswordFile
from gateway.links.websocket import WebSocketLink
from gateway.memory.service import MemoryService
from gateway.screens.server import ScreensServer
from gateway.screens.tls import server_context

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"
RULE = "Blood pressure above 140/90: tell Anna to rest."


@dataclass
class ConsoleGateway:
    cfg: GatewayConfig
    gateway: Gateway
    base: str  # http://127.0.0.1:PORT
    device_url: str  # ws://127.0.0.1:PORT/ws
    host: str  # 127.0.0.1:PORT (the Host the console is asked on)
    tls_host: str  # 127.0.0.1:PORT of a second screen server with https (and http) on one port


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Client:
    """A minimal HTTP/1.1 client (one request per connection, like a browser's fetch) that keeps
    the session cookie and, after login, sends the CSRF token and the console's Origin on writes."""

    host: str
    cookie: str = ""
    csrf: str = ""
    origin: str | None = field(default=None)
    local: str = "127.0.0.1"  # the client's own address (another 127.x address is another peer)
    tls: bool = False  # https (the self-signed certificate is not checked)

    async def request(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Answer:
        addr, port = self.host.split(":")
        context = None
        if self.tls:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        reader, writer = await asyncio.open_connection(addr, int(port), local_addr=(self.local, 0), ssl=context)
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        h = {"Host": self.host, "Connection": "close"}
        if method != "GET":
            h |= {"Content-Type": "application/json", "Content-Length": str(len(data)), "Origin": self.origin or f"{'https' if self.tls else 'http'}://{self.host}"}
            if self.csrf:
                h["X-CSRF-Token"] = self.csrf
        if self.cookie:
            h["Cookie"] = self.cookie
        h |= headers or {}
        h = {k: v for k, v in h.items() if v is not None}
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        writer.write(head.encode() + data)
        await writer.drain()
        # A guard against a hang, not a speed check: the health checks hash the model files,
        # which takes more than 10 s on an emulated or busy machine.
        raw = await asyncio.wait_for(reader.read(), 120)
        writer.close()
        head_raw, _, rest = raw.partition(b"\r\n\r\n")
        lines = head_raw.decode("latin-1").split("\r\n")
        headers_out = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers_out[name.strip().lower()] = value.strip()
        status = int(lines[0].split()[1])
        if "content-length" in headers_out:
            rest = rest[: int(headers_out["content-length"])]
        if cookie := headers_out.get("set-cookie"):
            self.cookie = cookie.split(";", 1)[0]
        return Answer(status, headers_out, rest)

    async def login(self, password: str = PASSWORD) -> Answer:
        answer = await self.request("POST", "/console/api/login", {"password": password})
        if answer.status == 200:
            self.csrf = answer.json()["csrf"]
        return answer


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def console_gateway(fake_runner, tmp_path_factory) -> AsyncIterator[ConsoleGateway]:
    data = tmp_path_factory.mktemp("console")
    shutil.copy(ROOT / "config" / "replies.yaml", data / "replies.yaml")  # the console edits this copy
    shutil.copy(ROOT / "config" / "action_rules.csv", data / "action_rules.csv")  # and this one
    cfg = parse_config({
        "brain": {"replies": str(data / "replies.yaml")},
        "expression": {"action_rules": str(data / "action_rules.csv")},
        "server": {"hello_timeout_s": 2},
        "devices": {"database": str(data / "gateway.db")},
        "console": {"password_file": str(data / "console-password"), "max_failed_logins": 3},
        "memory": {"path": str(data / "memory.db"), "users": {"bp-anna": "anna", "box-anna": "anna"},
                   "rules": [{"user": "anna", "text": RULE, "reading": "blood_pressure", "above": "140/90"}]},
    }, ROOT)
    PasswordFile(cfg.path(cfg.console.password_file)).set(PASSWORD)
    link = WebSocketLink("127.0.0.1", 0, cfg.server.websocket_path, cfg.server.max_frame_bytes)
    screens = ScreensServer("127.0.0.1", 0, "/screen", key="console-test-screen-key")
    secure = ScreensServer("127.0.0.1", 0, "/screen", tls=server_context(data / "cert.pem", data / "key.pem"),
                           key="console-test-screen-key")
    gateway = Gateway(cfg, fake_runner, [link, screens, secure], memory=MemoryService.from_config(cfg))
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():  # a link or the memory could not start: say why instead of timing out
        waiting.cancel()
        task.cancel()
        raise RuntimeError(f"the gateway did not start: {task.exception() if task.done() else 'not ready in 60 s'}")
    yield ConsoleGateway(cfg, gateway, f"http://127.0.0.1:{screens.port}", f"ws://127.0.0.1:{link.port}{cfg.server.websocket_path}",
                         f"127.0.0.1:{screens.port}", f"127.0.0.1:{secure.port}")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def client(console_gateway) -> Client:
    return Client(console_gateway.host)


@pytest_asyncio.fixture(loop_scope="session")
async def admin(console_gateway) -> Client:
    c = Client(console_gateway.host)
    assert (await c.login()).status == 200
    return c
