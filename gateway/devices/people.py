"""Which person a device belongs to, as set from the console: the `device_people` table of the
devices database. A row overrides `memory.users` of gateway.yaml for its device; an empty person
means "its own memory" (`device.<id>`) even when gateway.yaml maps it. The live mapping the
gateway uses is `DevicePeople` (gateway/memory/device_users.py), loaded from here at start.
"""

from __future__ import annotations

import sqlite3


def load_people(conn: sqlite3.Connection) -> dict[str, str]:
    """device id -> person ("" = its own memory) for every device the console mapped."""
    return dict(conn.execute("SELECT device_id, person FROM device_people ORDER BY device_id"))


def set_person(conn: sqlite3.Connection, device_id: str, person: str, now: float) -> None:
    conn.execute("INSERT INTO device_people(device_id, person, updated_at) VALUES (?, ?, ?) "
                 "ON CONFLICT(device_id) DO UPDATE SET person = excluded.person, updated_at = excluded.updated_at",
                 (device_id, person, now))


def clear_person(conn: sqlite3.Connection, device_id: str) -> bool:
    """Back to gateway.yaml's mapping; False when the console had not mapped the device."""
    return conn.execute("DELETE FROM device_people WHERE device_id = ?", (device_id,)).rowcount == 1
