"""`gateway storage migrate --from sqlite --to postgres` on a box with devices, readings and memories:
everything arrives (ids kept, the memory searchable), a second run copies nothing and changes nothing."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import yaml

from firmware_protocol import SensorReading
from gateway.devices.auth import add_device
from gateway.devices.database import connect
from gateway.devices.readings import insert_reading
from gateway.memory.service import MemoryService
from gateway.storage.memory_store import PostgresMemoryStore
from tests.conftest import ROOT
from tests.memory.conftest import embedder  # noqa: F401  (the real MiniLM fixture)

BP = (("systolic", "mmHg", 150.0), ("diastolic", "mmHg", 95.0))


def migrate_cli(config: Path, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway", "storage", "migrate", "--from", "sqlite", "--to", "postgres",
                           "--config", str(config)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "BOX_PG": dsn})


async def test_a_box_moves_to_postgres_once(tmp_path: Path, postgres_dsn: str, embedder) -> None:  # noqa: F811
    devices_db, memory_db = tmp_path / "gateway.db", tmp_path / "memory.db"
    conn = connect(devices_db)
    token = add_device(conn, "bp-1", "Anna's cuff")
    for seq in range(1, 2501):  # more than one batch
        insert_reading(conn, "bp-1", SensorReading(seq, "blood_pressure", 0, BP), 1_764_547_200.0 + seq)
    conn.execute("INSERT INTO readings_pruned (device_id, max_seq, pruned) VALUES ('bp-0', 40, 40)")
    conn.close()
    async with MemoryService(memory_db, lambda: embedder) as memory:
        violin = await memory.remember("anna", "Mia plays the violin on Sundays", kind="fact", source="box-1")
        await memory.remember("anna", "The plumber comes on Tuesday", kind="event")
        await memory.set_cursor("readings", 2400)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"devices": {"database": str(devices_db)}, "memory": {"path": str(memory_db)},
                                      "storage": {"backend": "postgres", "dsn_env": "BOX_PG"}}))

    first = migrate_cli(config, postgres_dsn)
    assert first.returncode == 0, first.stderr
    assert "storage: readings: 2000/2500" in first.stdout and "storage: readings: 2500/2500" in first.stdout
    assert "storage: nodes: 2 rows in SQLite, 2 copied now, 2 in PostgreSQL" in first.stdout
    with psycopg.connect(postgres_dsn) as pg:
        assert pg.execute("SELECT min(id), max(id), count(*) FROM readings").fetchone() == (1, 2500, 2500)
        assert pg.execute("SELECT name, broker_hash IS NOT NULL FROM devices").fetchall() == [("Anna's cuff", True)]
        assert pg.execute("SELECT max_seq FROM readings_pruned WHERE device_id = 'bp-0'").fetchone() == (40,)
        assert pg.execute("SELECT position FROM feed_cursors WHERE name = 'readings'").fetchone() == (2400,)
        # a reading stored after the move gets the next id, not one of the copied ones
        assert pg.execute("INSERT INTO readings (device_id, seq, kind, measured_at, received_at, clock, \"values\")"
                          " VALUES ('bp-1', 2501, 'x', 0, 0, 'gateway', '[]') RETURNING id").fetchone() == (2501,)
        pg.rollback()
    with psycopg.connect(postgres_dsn) as pg:  # the stored token hash checks the same token (auth.py: sha256)
        assert pg.execute("SELECT token_hash FROM devices WHERE device_id = 'bp-1'").fetchone() == (
            hashlib.sha256(token.encode()).hexdigest(),)

    second = migrate_cli(config, postgres_dsn)
    assert second.returncode == 0, second.stderr
    assert "done: 0 rows copied" in second.stdout
    with psycopg.connect(postgres_dsn) as pg:
        assert pg.execute("SELECT count(*) FROM readings").fetchone() == (2500,)
        assert pg.execute("SELECT count(*) FROM nodes").fetchone() == (2,)

    async with MemoryService(":postgres:", lambda: embedder, open_store=lambda: PostgresMemoryStore(postgres_dsn)) as pg_memory:
        [found, *_] = await pg_memory.search("anna", "what instrument does Mia play?", 2)
        assert found.node.id == violin.id and "source:box-1" in found.node.tags
        assert found.relevance > 0.5


def test_without_the_dsn_it_stops_naming_the_variable(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"devices": {"database": str(tmp_path / "g.db")},
                                      "storage": {"dsn_env": "BOX_PG_UNSET"}}))
    done = subprocess.run([sys.executable, "-m", "gateway", "storage", "migrate", "--from", "sqlite", "--to", "postgres",
                           "--config", str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "BOX_PG_UNSET"})
    assert done.returncode == 2 and "BOX_PG_UNSET" in done.stderr


def test_without_the_driver_it_names_the_extra() -> None:
    code = ("import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None; "
            "from gateway.cli import main; sys.exit(main(['storage', 'migrate', '--from', 'sqlite', '--to', 'postgres']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "pip install -e '.[postgres]'" in done.stderr


def _box_config(tmp_path: Path, devices_db: Path) -> Path:
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"devices": {"database": str(devices_db)}, "memory": {"path": str(tmp_path / "m.db")},
                                      "storage": {"backend": "postgres", "dsn_env": "BOX_PG"}}))
    return config


def test_a_xiaozhi_boxs_client_id_binding_moves_with_it(tmp_path: Path, postgres_dsn: str) -> None:
    devices_db = tmp_path / "gateway.db"
    conn = connect(devices_db)
    add_device(conn, "24:0a:c4:11:22:33", "kitchen box")
    conn.execute("UPDATE devices SET client_hash = 'c1', open_enrolled = 1")
    conn.execute("INSERT INTO activations (device_id, code, challenge, created_at, expires_at, client_hash)"
                 " VALUES ('24:0a:c4:44:55:66', '123456', 'x', 0, 1e12, 'c2')")
    conn.close()
    moved = migrate_cli(_box_config(tmp_path, devices_db), postgres_dsn)
    assert moved.returncode == 0, moved.stderr
    with psycopg.connect(postgres_dsn) as pg:
        assert pg.execute("SELECT client_hash, open_enrolled FROM devices").fetchall() == [("c1", 1)]
        assert pg.execute("SELECT client_hash FROM activations").fetchall() == [("c2",)]


def test_a_database_from_before_the_binding_moves_unbound(tmp_path: Path, postgres_dsn: str) -> None:
    devices_db = tmp_path / "gateway.db"
    conn = connect(devices_db)
    add_device(conn, "bp-1", "cuff")
    for table, column in (("devices", "client_hash"), ("devices", "open_enrolled"), ("activations", "client_hash")):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")  # as an older gateway left it
    conn.close()
    moved = migrate_cli(_box_config(tmp_path, devices_db), postgres_dsn)
    assert moved.returncode == 0, moved.stderr
    with psycopg.connect(postgres_dsn) as pg:
        assert pg.execute("SELECT device_id, client_hash, open_enrolled FROM devices").fetchall() == [("bp-1", None, 0)]
