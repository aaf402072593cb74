"""The console's API against a running gateway (fake engines, real device database and memory):
no session, no data; wrong passwords throttled; forged cross-site writes refused; bad writes
change nothing; devices added, connecting and sending readings; activation codes approved or
rejected; the readings with the memory rules' thresholds and as CSV; health."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import websockets

from firmware_protocol import Hello, ReadingAck, SensorReading, Welcome, decode, encode
from gateway.console.password import PasswordFile
from gateway.devices import activation
from gateway.devices.auth import get_device, list_devices

from tests.console.conftest import PASSWORD, Client

pytestmark = pytest.mark.asyncio(loop_scope="session")

PAGES = ["/console", "/console/", "/console/index.html", "/console/common.js", "/console/devices.js", "/console/memory.js",
         "/console/chart.js"]
APIS = ["devices", "readings", "readings.csv", "health", "session"]


async def _devices(console_gateway) -> list[str]:
    return [d.device_id for d in await console_gateway.gateway.db.run(list_devices)]


async def test_no_page_and_no_api_answers_without_a_session(client) -> None:
    for path in PAGES:
        answer = await client.request("GET", path)
        assert answer.status == 401, path
        assert b'id="login"' in answer.body  # the login form instead
    for name in APIS:
        answer = await client.request("GET", f"/console/api/{name}")
        assert answer.status == 401, name
        assert answer.json()["error"] == "login-needed"
    answer = await client.request("POST", "/console/api/devices/add", {"device_id": "sneaky"})
    assert answer.status == 401
    for public in ("/console/login.js", "/console/console.css"):  # the login page's own files hold no data
        assert (await client.request("GET", public)).status == 200


async def test_a_wrong_session_cookie_is_no_session(client) -> None:
    client.cookie = "gw_console=forged-token"
    assert (await client.request("GET", "/console/api/devices")).status == 401


async def test_login_sets_a_strict_http_only_cookie_and_the_session_reads_the_api(client) -> None:
    answer = await client.login()
    assert answer.status == 200
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("gw_console=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/console" in cookie and "Secure" not in cookie  # plain http here (Secure over https)
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert (await client.request("GET", "/console")).status == 200
    assert (await client.request("GET", "/console/api/devices")).status == 200
    assert (await client.request("GET", "/console/api/session")).json()["csrf"] == client.csrf


async def test_wrong_passwords_are_throttled_per_peer_even_the_right_one_then(console_gateway, caplog) -> None:
    attacker = Client(console_gateway.host, local="127.0.0.2")  # another peer: the others are not locked out
    with caplog.at_level(logging.WARNING):
        for _ in range(console_gateway.cfg.console.max_failed_logins):
            assert (await attacker.login("wrong password")).status == 401
        locked = await attacker.login(PASSWORD)
    assert locked.status == 429 and int(locked.headers["retry-after"]) >= 59
    assert "try again in" in locked.json()["message"]
    assert "console 127.0.0.2:" in caplog.text and "wrong password" in caplog.text and "too many wrong passwords" in caplog.text
    assert not attacker.cookie
    assert (await Client(console_gateway.host).login()).status == 200  # 127.0.0.1 still gets in


async def test_a_forged_cross_site_write_is_refused_and_changes_nothing(console_gateway, admin, caplog) -> None:
    before = await _devices(console_gateway)
    forged = [
        {"Origin": "http://evil.example"},  # another site's page posting with the cookie
        {"Origin": None},  # no Origin at all
        {"X-CSRF-Token": "not-the-token"},
        {"X-CSRF-Token": None},
        {"Content-Type": "text/plain"},  # a cross-site <form> can only send form or plain text bodies
    ]
    with caplog.at_level(logging.WARNING):
        for headers in forged:
            answer = await admin.request("POST", "/console/api/devices/add", {"device_id": "forged-box"}, headers)
            assert answer.status == 403, headers
            assert answer.json()["error"] == "forbidden"
    assert "cross-site request from 'http://evil.example'" in caplog.text
    assert "missing or wrong X-CSRF-Token" in caplog.text
    assert await _devices(console_gateway) == before
    # a cross-site login attempt is refused too
    other = Client(console_gateway.host, origin="http://evil.example")
    assert (await other.login()).status == 403


@pytest.mark.parametrize(("path", "body", "status", "field"), [
    ("devices/add", {"device_id": "bad id!"}, 400, "device_id"),
    ("devices/add", {"device_id": ""}, 400, "device_id"),
    ("devices/add", {"device_id": "x" * 65}, 400, "device_id"),
    ("devices/add", {"device_id": "ok-box", "name": 7}, 400, "name"),
    ("devices/add", ["not", "an", "object"], 400, None),
    ("devices/remove", {"device_id": "never-registered"}, 404, "device_id"),
    ("devices/rename", {"device_id": "never-registered", "name": "x"}, 404, "device_id"),
    ("devices/approve", {"code": "12ab56"}, 400, "code"),
    ("devices/approve", {"code": "000000"}, 404, "code"),
    ("devices/reject", {"device_id": "nobody-waits"}, 404, "device_id"),
])
async def test_a_bad_write_gets_a_clear_error_and_changes_nothing(console_gateway, admin, path, body, status, field) -> None:
    before = await _devices(console_gateway)
    answer = await admin.request("POST", f"/console/api/{path}", body)
    assert answer.status == status
    assert answer.json()["field"] == field and answer.json()["message"]
    assert await _devices(console_gateway) == before


async def test_a_body_that_is_not_json_or_an_unknown_api_is_a_clear_error(admin) -> None:
    answer = await admin.request("POST", "/console/api/devices/add", b"{not json")
    assert answer.status == 400 and "not JSON" in answer.json()["message"]
    answer = await admin.request("GET", "/console/api/nothing-here")
    assert answer.status == 404 and "devices" in answer.json()["message"]
    assert (await admin.request("GET", "/console/api/readings?days=2")).status == 400


async def _connect(url: str, device_id: str, token: str):
    ws = await websockets.connect(url)
    await ws.send(encode(Hello(device_id, token, firmware="cuff-fw 1.2")))
    welcome = decode(await asyncio.wait_for(ws.recv(), 5))
    assert isinstance(welcome, Welcome), welcome
    return ws


async def _send_reading(ws, seq: int, systolic: float, diastolic: float, pulse: float = 70.0, ago_s: float = 5) -> None:
    values = (("systolic", "mmHg", systolic), ("diastolic", "mmHg", diastolic), ("pulse", "bpm", pulse))
    await ws.send(encode(SensorReading(seq, "blood_pressure", int(time.time() - ago_s), values)))
    while True:
        message = decode(await asyncio.wait_for(ws.recv(), 5))
        if isinstance(message, ReadingAck):
            assert message.seq == seq and message.code == "", message
            return


async def test_a_device_added_connects_with_its_credentials_and_its_readings_have_the_thresholds(console_gateway, admin, caplog) -> None:
    with caplog.at_level(logging.INFO):
        added = (await admin.request("POST", "/console/api/devices/add", {"device_id": "bp-anna", "name": "Anna's cuff"})).json()
    assert added["firmware"]["GATEWAY_TOKEN"] == added["token"] and added["firmware"]["GATEWAY_DEVICE_ID"] == "bp-anna"
    assert "device bp-anna registered" in caplog.text and "console 127.0.0.1:" in caplog.text
    ws = await _connect(console_gateway.device_url, "bp-anna", added["token"])
    try:
        await console_gateway.gateway.registry.wait_until(lambda r: "bp-anna" in r.connected(), 5)
        devices = (await admin.request("GET", "/console/api/devices")).json()
        [live] = [d for d in devices["connected"] if d["device_id"] == "bp-anna"]
        assert live["link"] == "ws" and live["address"].startswith("127.0.0.1:") and live["person"] == "anna"
        assert live["audio_in"] == "pcm_s16le 16000 Hz mono" and live["firmware"] == "cuff-fw 1.2"
        assert abs(live["since"] - time.time()) < 600  # (a timestamp, not a duration check)
        [registered] = [d for d in devices["registered"] if d["device_id"] == "bp-anna"]
        assert registered["name"] == "Anna's cuff" and registered["connected"] and registered["mapped"]
        assert "cluster" not in devices and "served_by" not in registered  # a single box: no cluster columns
        await _send_reading(ws, 1, 152, 93)
    finally:
        await ws.close()
    readings = (await admin.request("GET", "/console/api/readings?person=anna&kind=blood_pressure&days=1")).json()
    assert "anna" in readings["people"] and readings["kinds"] == ["blood_pressure"]
    [row] = [r for r in readings["readings"] if r["device_id"] == "bp-anna"]
    assert row["values"] == {"systolic": 152.0, "diastolic": 93.0, "pulse": 70.0}
    assert {"kind": "blood_pressure", "limits": [140.0, 90.0]}.items() <= readings["thresholds"][0].items()
    csv = await admin.request("GET", "/console/api/readings.csv?person=anna&kind=blood_pressure&days=1")
    assert csv.headers["content-type"].startswith("text/csv")
    assert 'filename="readings-anna-blood_pressure.csv"' in csv.headers["content-disposition"]
    lines = csv.body.decode().splitlines()
    assert lines[0] == "id,measured_at_utc,device_id,person,kind,name,value,unit"
    assert any(line.endswith(",bp-anna,anna,blood_pressure,systolic,152.0,mmHg") for line in lines)
    nobody = (await admin.request("GET", "/console/api/readings?person=ben&days=1")).json()
    assert nobody["readings"] == [] and nobody["thresholds"] == []


async def test_rename_and_remove_a_device(console_gateway, admin) -> None:
    await admin.request("POST", "/console/api/devices/add", {"device_id": "hall-box"})
    answer = await admin.request("POST", "/console/api/devices/rename", {"device_id": "hall-box", "name": "Hall"})
    assert answer.status == 200
    assert (await console_gateway.gateway.db.run(get_device, "hall-box")).name == "Hall"
    assert (await admin.request("POST", "/console/api/devices/remove", {"device_id": "hall-box"})).status == 200
    assert await console_gateway.gateway.db.run(get_device, "hall-box") is None


async def test_a_waiting_box_is_approved_or_rejected_by_its_code(console_gateway, admin) -> None:
    db, ttl = console_gateway.gateway.db, console_gateway.cfg.xiaozhi.activation_ttl_s
    first = await db.run(activation.offer, "aa:bb:cc:00:00:01", "MAC aa:bb:cc:00:00:01, board test", ttl, time.time())
    second = await db.run(activation.offer, "aa:bb:cc:00:00:02", "MAC aa:bb:cc:00:00:02", ttl, time.time())
    pending = (await admin.request("GET", "/console/api/devices")).json()["pending"]
    assert {(p["device_id"], p["code"]) for p in pending} >= {(first.device_id, first.code), (second.device_id, second.code)}
    answer = await admin.request("POST", "/console/api/devices/approve", {"code": first.code})
    assert answer.json()["approved"] == first.device_id
    assert await db.run(activation.claim, first.device_id, "box", time.time())  # its next OTA request gets a token
    assert (await admin.request("POST", "/console/api/devices/reject", {"device_id": second.device_id})).status == 200
    assert await db.run(activation.get, second.device_id, time.time()) is None


async def test_health_names_the_version_ports_models_and_last_log_lines(admin) -> None:
    health = (await admin.request("GET", "/console/api/health?lines=200")).json()
    assert health["version"] and health["models"]["asr"]
    assert {"screens.port", "server.websocket_port"} <= {p["key"] for p in health["ports"]}
    assert any("logged in" in line for line in health["log"])


async def test_logout_and_a_new_password_end_the_sessions(console_gateway) -> None:
    one, two = Client(console_gateway.host), Client(console_gateway.host)
    await one.login()
    await two.login()
    assert (await one.request("POST", "/console/api/logout", {})).status == 200
    assert (await one.request("GET", "/console/api/devices")).status == 401
    store = PasswordFile(console_gateway.cfg.path(console_gateway.cfg.console.password_file))
    store.set("a brand new password")
    try:
        assert (await two.request("GET", "/console/api/devices")).status == 401
        assert (await two.login(PASSWORD)).status == 401
        assert (await two.login("a brand new password")).status == 200
    finally:
        store.set(PASSWORD)


async def _wait_for(fetch, condition, timeout: float = 15.0):
    """Poll the API until `condition(answer)` (bounded; the memory writes in the background)."""
    async with asyncio.timeout(timeout):
        while not condition(answer := await fetch()):
            await asyncio.sleep(0.1)
    return answer


async def test_a_spoken_turn_shows_in_the_conversations_and_the_memory_can_be_searched(console_gateway, admin, fake_speak) -> None:
    from gateway.cli.virtual_box import simulate

    audio, rate = fake_speak("Thank you.")
    await simulate(console_gateway.device_url, audio, rate, device_id="box-anna", speed=2.0, timeout=30)

    async def turns():
        return (await admin.request("GET", "/console/api/conversations?person=anna&device=box-anna")).json()

    answer = await _wait_for(turns, lambda a: any(t["said"] == "Thank you." for t in a["turns"]))
    [turn] = [t for t in answer["turns"] if t["said"] == "Thank you."][:1]
    assert turn["device_id"] == "box-anna" and turn["answered"] == "You are welcome."
    found = (await admin.request("GET", "/console/api/memory?person=anna&q=thank+you&n=5")).json()
    assert any("Thank you." in n["content"] for n in found["nodes"])
    rules = (await admin.request("GET", "/console/api/memory?person=anna&tag=kind:rule")).json()
    assert [n["content"] for n in rules["nodes"]] == ["Blood pressure above 140/90: tell Anna to rest."]
    assert "anna" in (await admin.request("GET", "/console/api/people")).json()["people"]
    for bad in ("memory?q=x", "memory?person=anna&n=0", "memory?person=anna&type=nonsense", "conversations?person=anna&n=x"):
        answer = await admin.request("GET", f"/console/api/{bad}")
        assert answer.status == 400 and answer.json()["message"], bad


async def test_a_memory_is_deleted_only_by_its_owner_and_a_bad_delete_changes_nothing(console_gateway, admin, caplog) -> None:
    memory = console_gateway.gateway.memory
    node = await memory.remember("anna", "Anna's spare key is under the blue flower pot")

    async def found() -> list[int]:
        answer = (await admin.request("GET", "/console/api/memory?person=anna&q=spare+key&n=5")).json()
        return [n["id"] for n in answer["nodes"]]

    assert node.id in await found()
    for body, status in (({"person": "ben", "id": node.id}, 404), ({"person": "anna", "id": "7"}, 400),
                         ({"person": "anna", "id": True}, 400), ({"id": node.id}, 400), ({"person": "no one!", "id": node.id}, 400)):
        answer = await admin.request("POST", "/console/api/memory/delete", body)
        assert answer.status == status, body
    assert node.id in await found()  # nothing changed
    with caplog.at_level(logging.INFO):
        assert (await admin.request("POST", "/console/api/memory/delete", {"person": "anna", "id": node.id})).status == 200
    assert f"memory #{node.id} of anna deleted" in caplog.text
    assert node.id not in await found()
    assert (await admin.request("POST", "/console/api/memory/delete", {"person": "anna", "id": node.id})).status == 404


async def test_health_checks_are_what_gateway_doctor_checks_without_the_engines(admin) -> None:
    checks = (await admin.request("GET", "/console/api/health/checks")).json()["checks"]
    whats = " | ".join(c["what"] for c in checks)
    assert "model " in whats and "checksums" in whats  # the models and their checksums
    assert "engines" not in whats  # not loaded a second time inside the running gateway
    assert all(c["status"] in ("OK", "WARN", "FAIL") for c in checks)


async def test_over_https_the_session_cookie_is_secure_and_writes_need_the_https_origin(console_gateway) -> None:
    secure = Client(console_gateway.tls_host, tls=True)
    answer = await secure.login()
    assert answer.status == 200 and "; Secure" in answer.headers["set-cookie"]
    assert (await secure.request("GET", "/console/api/devices")).status == 200
    plain_origin = await secure.request("POST", "/console/api/devices/add", {"device_id": "tls-box"},
                                        {"Origin": f"http://{console_gateway.tls_host}"})
    assert plain_origin.status == 403
    assert "tls-box" not in await _devices(console_gateway)
    assert (await secure.request("POST", "/console/api/devices/remove", {"device_id": "never"})).status == 404  # CSRF ok
    plain = Client(console_gateway.tls_host)  # the same port over plain http from this machine still works
    answer = await plain.login()
    assert answer.status == 200 and "Secure" not in answer.headers["set-cookie"]


async def test_the_period_chooses_the_readings_by_when_they_were_measured(console_gateway, admin) -> None:
    values = (("systolic", "mmHg", 118.0), ("diastolic", "mmHg", 77.0), ("pulse", "bpm", 61.0))
    ack = await console_gateway.gateway.readings.handle(
        "bp-anna", "test", SensorReading(900, "blood_pressure", int(time.time() - 3 * 86400), values))
    assert ack.code == ""

    async def systolics(days: str) -> list[float]:
        answer = (await admin.request("GET", f"/console/api/readings?person=anna&kind=blood_pressure&days={days}")).json()
        return [r["values"]["systolic"] for r in answer["readings"] if r["device_id"] == "bp-anna"]

    assert 118.0 not in await systolics("1")
    assert 118.0 in await systolics("7") and 118.0 in await systolics("30")
    week = (await admin.request("GET", "/console/api/readings?person=anna&kind=blood_pressure&days=7")).json()["readings"]
    assert [r["measured_at"] for r in week] == sorted(r["measured_at"] for r in week)  # oldest first, for the chart
