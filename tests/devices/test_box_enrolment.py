"""A self-enrolling box on the SQLite registry (gateway/devices/auth.py enrol_box): bound to its
Client-Id at its first registration; the same Client-Id gets a new token, another is refused and
changes nothing; the owner's `add_device` keeps the binding; the cap counts only devices the open
enrolment created; a database from before the binding gets the columns and binds at the next
request."""

from __future__ import annotations

import sqlite3

from gateway.devices.auth import (BOUND, FULL, NOT_ADMITTED, OTHER_CLIENT, REGISTERED, RENEWED, add_device,
                                  check_token, enrol_box, get_device, remove_device, rename_device)
from gateway.devices.database import connect


def test_a_box_is_bound_to_its_client_id_and_another_one_changes_nothing(tmp_path):
    conn = connect(tmp_path / "g.db")
    first = enrol_box(conn, "xiaozhi-1", "xiaozhi box 1", "uuid-1", True, 10)
    assert first.outcome == REGISTERED and check_token(conn, "xiaozhi-1", first.token) is True
    assert "uuid-1" not in str(conn.execute("SELECT * FROM devices").fetchall())  # only its hash
    rename_device(conn, "xiaozhi-1", "kitchen")
    again = enrol_box(conn, "xiaozhi-1", "xiaozhi box 1 v2", "uuid-1", True, 10)
    assert again.outcome == RENEWED and check_token(conn, "xiaozhi-1", again.token) is True
    assert check_token(conn, "xiaozhi-1", first.token) is False  # replaced, as at every boot before
    stranger = enrol_box(conn, "xiaozhi-1", "attacker", "uuid-2", True, 10)
    assert (stranger.outcome, stranger.token) == (OTHER_CLIENT, None)
    assert check_token(conn, "xiaozhi-1", again.token) is True and get_device(conn, "xiaozhi-1").name == "kitchen"


def test_a_device_without_a_binding_is_bound_on_first_use_and_the_owners_token_rotation_keeps_it(tmp_path):
    conn = connect(tmp_path / "g.db")
    add_device(conn, "xiaozhi-2", "hall")  # `gateway devices add`
    assert enrol_box(conn, "xiaozhi-2", "", "uuid-3", False, 0).outcome == BOUND  # not new: no limit applies
    add_device(conn, "xiaozhi-2", "hall")  # the owner rotates its token
    assert enrol_box(conn, "xiaozhi-2", "", "uuid-4", True, 10).outcome == OTHER_CLIENT
    assert enrol_box(conn, "xiaozhi-2", "", "uuid-3", True, 10).outcome == RENEWED
    assert remove_device(conn, "xiaozhi-2")  # its settings were erased: removed, it registers again
    assert enrol_box(conn, "xiaozhi-2", "", "uuid-4", True, 10).outcome == REGISTERED


def test_only_devices_the_open_enrolment_created_count_towards_its_cap(tmp_path):
    conn = connect(tmp_path / "g.db")
    for device in ("sensor-1", "sensor-2", "sensor-3"):
        add_device(conn, device)
    assert enrol_box(conn, "xiaozhi-a", "", "a", False, 2).outcome == NOT_ADMITTED  # the caller's rate limit
    assert [enrol_box(conn, f"xiaozhi-{c}", "", c, True, 2).outcome for c in "abc"] == [REGISTERED, REGISTERED, FULL]
    assert get_device(conn, "xiaozhi-c") is None
    assert enrol_box(conn, "xiaozhi-a", "", "a", True, 2).outcome == RENEWED  # registered ones still boot
    remove_device(conn, "xiaozhi-b")
    assert enrol_box(conn, "xiaozhi-c", "", "c", True, 2).outcome == REGISTERED


def test_a_database_from_before_the_binding_gets_it_and_its_boxes_bind_at_their_next_request(tmp_path):
    old = sqlite3.connect(tmp_path / "g.db")
    old.execute("CREATE TABLE devices (device_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, name TEXT NOT NULL"
                " DEFAULT '', created_at REAL NOT NULL, last_seen REAL, broker_hash TEXT)")
    old.execute("INSERT INTO devices VALUES ('xiaozhi-9', 'h', 'old box', 1, NULL, NULL)")
    old.commit()
    old.close()
    conn = connect(tmp_path / "g.db")
    assert conn.execute("SELECT client_hash, open_enrolled FROM devices").fetchall() == [(None, 0)]
    assert enrol_box(conn, "xiaozhi-9", "", "uuid-9", True, 10).outcome == BOUND
    assert enrol_box(conn, "xiaozhi-9", "", "uuid-0", True, 10).outcome == OTHER_CLIENT
    assert get_device(conn, "xiaozhi-9").name == "old box"
