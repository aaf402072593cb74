"""`gateway devices list/remove/pending/activate` and `gateway readings prune` with storage.backend
postgres, run as a user runs them (the CLI in a process of its own, the DSN from the environment):
they act on the shared registry, activation codes and readings every gateway of the database
serves, not on a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from firmware_protocol import SensorReading
from gateway.devices.retention import DAY_S
from gateway.storage.activations import PostgresActivations
from gateway.storage.pool import open_pool
from gateway.storage.readings import PostgresReadingStore
from tests.conftest import ROOT
from tests.storage.test_pg_retention import STORAGE


def gateway(tmp_path: Path, dsn: str, *args: str) -> subprocess.CompletedProcess:
    config = tmp_path / "gateway.yaml"
    if not config.exists():
        config.write_text(json.dumps({"storage": {"backend": "postgres", "connect_timeout_s": 3},
                                      "devices": {"database": str(tmp_path / "gateway.db")},
                                      "memory": {"enabled": False}}))  # JSON is YAML
    return subprocess.run([sys.executable, "-m", "gateway", "--config", str(config), *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**os.environ, "GATEWAY_PG_DSN": dsn})


def test_devices_list_and_remove_on_postgres(tmp_path: Path, postgres_dsn: str) -> None:
    assert "no devices registered" in gateway(tmp_path, postgres_dsn, "devices", "list").stdout
    for device, name in (("box-2", "hall"), ("box-1", "kitchen")):
        assert gateway(tmp_path, postgres_dsn, "devices", "add", device, "--name", name).returncode == 0
    listed = gateway(tmp_path, postgres_dsn, "devices", "list")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["box-1", "box-2"] and "never" in lines[0] and lines[0].endswith("kitchen")
    removed = gateway(tmp_path, postgres_dsn, "devices", "remove", "box-1")
    assert removed.returncode == 0 and "box-1 removed" in removed.stdout
    again = gateway(tmp_path, postgres_dsn, "devices", "remove", "box-1")
    assert again.returncode == 1 and "no device box-1" in again.stderr
    with psycopg.connect(postgres_dsn) as conn:  # PostgreSQL's registry, not a SQLite file
        assert conn.execute("SELECT device_id FROM devices").fetchall() == [("box-2",)]
    assert not (tmp_path / "gateway.db").exists()
    assert gateway(tmp_path, postgres_dsn, "devices", "show", "box-1").returncode == 1
    bad = gateway(tmp_path, postgres_dsn, "devices", "remove", "no/such")
    assert bad.returncode == 2 and "must be 1..64" in bad.stderr


async def test_devices_pending_and_activate_on_postgres(tmp_path: Path, postgres_dsn: str) -> None:
    assert "no box is waiting" in gateway(tmp_path, postgres_dsn, "devices", "pending").stdout  # (migrates too)
    pool = await open_pool(postgres_dsn, STORAGE)
    try:  # a xiaozhi box asked one of the gateways for a code
        offered = await PostgresActivations(pool, 300).offer("xz-1", "esp32s3 kitchen")
    finally:
        await pool.close()
    pending = gateway(tmp_path, postgres_dsn, "devices", "pending")
    assert pending.returncode == 0 and offered.code in pending.stdout and "xz-1" in pending.stdout
    assert "expires in" in pending.stdout
    wrong = "000000" if offered.code != "000000" else "111111"
    missed = gateway(tmp_path, postgres_dsn, "devices", "activate", wrong)
    assert missed.returncode == 1 and f"no box is waiting with code {wrong}" in missed.stderr
    assert gateway(tmp_path, postgres_dsn, "devices", "activate", "12ab").returncode == 2
    done = gateway(tmp_path, postgres_dsn, "devices", "activate", offered.code)
    assert done.returncode == 0 and "box xz-1 approved" in done.stdout
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT approved_at IS NOT NULL FROM activations WHERE device_id = 'xz-1'").fetchone() == (True,)
    assert "approved, waiting for the box" in gateway(tmp_path, postgres_dsn, "devices", "pending").stdout


async def test_readings_and_readings_prune_on_postgres(tmp_path: Path, postgres_dsn: str) -> None:
    assert gateway(tmp_path, postgres_dsn, "devices", "list").returncode == 0  # migrates the new database
    pool = await open_pool(postgres_dsn, STORAGE)
    try:
        store = PostgresReadingStore(pool)
        for seq, age_days in ((1, 40), (2, 40), (3, 1)):
            await store.insert("hum-1", SensorReading(seq, "humidity", 0, (("percent", "%", 40.0),)),
                               time.time() - age_days * DAY_S)
    finally:
        await pool.close()
    listed = gateway(tmp_path, postgres_dsn, "readings", "--json")
    assert listed.returncode == 0 and [json.loads(line)["seq"] for line in listed.stdout.splitlines()] == [3, 2, 1]
    one = gateway(tmp_path, postgres_dsn, "readings", "--device", "hum-2", "--limit", "5")
    assert one.returncode == 0 and one.stdout.strip() == "no readings stored yet"
    dry = gateway(tmp_path, postgres_dsn, "readings", "prune", "--older-than", "30", "--dry-run")
    assert dry.returncode == 0 and "would prune 2 readings" in dry.stdout and "hum-1 2" in dry.stdout
    done = gateway(tmp_path, postgres_dsn, "readings", "prune", "--older-than", "30")
    assert done.returncode == 0 and "pruned 2 readings" in done.stdout
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT seq FROM readings").fetchall() == [(3,)]
        assert conn.execute("SELECT max_seq FROM readings_pruned WHERE device_id = 'hum-1'").fetchone() == (2,)
