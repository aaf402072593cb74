"""`gateway storage migrate --from sqlite --to postgres` checks the content, not only the keys: a
copy that PostgreSQL stores differently (here a trigger that changes one reading on its way in,
or a memory's embedding changed after the copy) stops the migration loudly, naming the table,
both checksums and the first differing row; an intact copy says its checksum per table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest
import yaml

from firmware_protocol import SensorReading
from gateway.devices.auth import add_device
from gateway.devices.database import connect
from gateway.devices.readings import insert_reading
from gateway.memory.nodes import NodeDraft
from gateway.memory.store import MemoryStore
from gateway.storage.from_sqlite import CopyMismatch, migrate_sqlite_to_postgres
from gateway.storage.schema import migrate
from tests.conftest import ROOT

BP = (("systolic", "mmHg", 150.0), ("diastolic", "mmHg", 95.0))


def _box(tmp_path: Path) -> tuple[Path, Path]:
    devices_db = tmp_path / "gateway.db"
    conn = connect(devices_db)
    add_device(conn, "bp-1", "Anna's cuff")
    add_device(conn, "ÄÖ-2", "sorts after every ASCII id in byte order")
    for seq in range(1, 2101):  # more than one batch of the comparison
        insert_reading(conn, "bp-1", SensorReading(seq, "blood_pressure", 0, BP), 1_764_547_200.0 + seq)
    conn.close()
    return devices_db, tmp_path / "gateway.yaml"


def test_a_reading_changed_on_its_way_in_fails_the_migration_naming_it(tmp_path: Path, postgres_dsn: str) -> None:
    devices_db, config = _box(tmp_path)
    config.write_text(yaml.safe_dump({"devices": {"database": str(devices_db)}, "memory": {"enabled": False},
                                      "storage": {"backend": "postgres", "dsn_env": "BOX_PG"}}))
    with psycopg.connect(postgres_dsn, autocommit=True) as pg:
        migrate(pg)
        pg.execute("""CREATE FUNCTION corrupt() RETURNS trigger LANGUAGE plpgsql AS $$
                      BEGIN IF NEW.id = 1777 THEN NEW."values" := replace(NEW."values", '150', '151'); END IF;
                      RETURN NEW; END $$""")
        pg.execute("CREATE TRIGGER corrupt BEFORE INSERT ON readings FOR EACH ROW EXECUTE FUNCTION corrupt()")
    done = subprocess.run([sys.executable, "-m", "gateway", "storage", "migrate", "--from", "sqlite", "--to",
                           "postgres", "--config", str(config)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "BOX_PG": postgres_dsn})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "error: storage: readings: checksum mismatch after the copy: SQLite sha256 " in done.stderr
    assert "1 rows differ, the first id=1777 (differs in values)" in done.stderr
    assert "storage: devices: sha256 " in done.stdout  # the devices before it were intact
    assert "done:" not in done.stdout


def test_an_intact_copy_passes_and_a_changed_embedding_is_caught_on_the_next_run(tmp_path: Path,
                                                                                postgres_dsn: str) -> None:
    devices_db, _ = _box(tmp_path)
    memory_db = tmp_path / "memory.db"
    store = MemoryStore(memory_db)
    rng = np.random.default_rng(17)
    vecs = rng.standard_normal((30, 384)).astype(np.float32)  # unit vectors like MiniLM's: the float16s
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)  # PostgreSQL keeps must equal the source's
    store.insert_many([NodeDraft("anna", "observation", f"memory {i}", 5, 1_764_547_200.0 + i, (f"n:{i}",), vec)
                       for i, vec in enumerate(vecs)], 1_764_547_300.0)
    store.close()
    lines: list[str] = []
    migrate_sqlite_to_postgres(devices_db, memory_db, postgres_dsn, lines.append)
    for table in ("devices", "readings", "nodes", "node_tags", "meta"):
        assert any(line.startswith(f"storage: {table}: sha256 ") and line.endswith(" on both sides")
                   for line in lines), (table, lines)
    migrate_sqlite_to_postgres(devices_db, memory_db, postgres_dsn, [].append)  # again: still equal

    with psycopg.connect(postgres_dsn) as pg:
        pg.execute("UPDATE nodes SET embedding = (SELECT embedding FROM nodes WHERE id = 3) WHERE id = 12")
    with pytest.raises(CopyMismatch, match=r"storage: nodes: checksum mismatch .* 1 rows differ, "
                                           r"the first id=12 \(differs in embedding\)"):
        migrate_sqlite_to_postgres(devices_db, memory_db, postgres_dsn, [].append)
