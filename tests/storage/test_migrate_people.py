"""`gateway storage migrate --from sqlite --to postgres` also moves what the console set on the box
(which person each device belongs to) and the codes xiaozhi boxes wait with: after it, a gateway
on PostgreSQL maps the devices and approves the waiting box as the box did."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from gateway.devices import activation
from gateway.devices.database import connect
from gateway.devices.people import set_person
from gateway.storage.from_sqlite import migrate_sqlite_to_postgres


def test_the_consoles_people_and_the_waiting_codes_move_to_postgres_once(tmp_path: Path, postgres_dsn: str) -> None:
    devices_db = tmp_path / "gateway.db"
    conn = connect(devices_db)
    set_person(conn, "kitchen", "anna", 1_764_547_200.0)
    set_person(conn, "garage", "", 1_764_547_300.0)  # "its own memory", whatever gateway.yaml says
    waiting = activation.offer(conn, "xiaozhi-a0b1c2000001", "MAC a0:b1:c2:00:00:01", 600, time.time())
    conn.close()
    lines: list[str] = []
    migrate_sqlite_to_postgres(devices_db, None, postgres_dsn, lines.append)
    with psycopg.connect(postgres_dsn) as pg:
        assert pg.execute("SELECT device_id, person FROM device_people ORDER BY device_id").fetchall() == [
            ("garage", ""), ("kitchen", "anna")]
        assert pg.execute("SELECT device_id, code, challenge FROM activations").fetchall() == [
            (waiting.device_id, waiting.code, waiting.challenge)]
    assert "storage: device_people: 2 rows in SQLite, 2 copied now, 2 in PostgreSQL" in lines
    again: list[str] = []
    migrate_sqlite_to_postgres(devices_db, None, postgres_dsn, again.append)
    assert "storage: device_people: 2 rows in SQLite, 0 copied now, 2 in PostgreSQL" in again
    assert "storage: activations: 1 rows in SQLite, 0 copied now, 1 in PostgreSQL" in again
