"""The device lease on a real PostgreSQL: one holder at a time, epochs as fencing tokens."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from gateway.cluster.leases import LeaseStoreDown, PgLeases
from gateway.storage.schema import migrate


async def test_only_one_of_two_gateways_gets_a_device_and_the_other_after_it_runs_out(postgres_dsn):
    with psycopg.connect(postgres_dsn) as conn:  # device_leases: the versioned migrations create it
        migrate(conn)
    a, b = PgLeases(postgres_dsn, "gw-a", 0.6, 5), PgLeases(postgres_dsn, "gw-b", 0.6, 5)
    try:
        both = await asyncio.gather(a.claim(["box-1", "box-2"]), b.claim(["box-1", "box-2"]))
        for device in ("box-1", "box-2"):  # claimed at the same moment: exactly one holder each
            assert sum(device in got for got in both) == 1
        got_a, got_b = both
        mine = sorted(got_a)
        assert await b.claim(mine) == {}  # held and not run out: refused
        assert await a.renew(mine) == {d: got_a[d] for d in mine}
        await asyncio.sleep(0.8)  # a stops renewing (killed, paused, cut off)
        taken = await b.claim(mine)
        assert taken == {d: got_a[d] + 1 for d in mine}  # the next epoch
        assert await a.renew(mine) == {}  # the old holder learns it lost them
        await b.release(mine)
        assert await a.claim(mine) == {d: got_a[d] + 2 for d in mine}  # released: free at once
        await a.release_all()  # a clean stop: everything a held is free for b
        assert sorted(await b.claim(["box-1", "box-2"])) == ["box-1", "box-2"]
    finally:
        await a.close()
        await b.close()


async def test_an_unreachable_database_raises_lease_store_down_and_nothing_is_held():
    leases = PgLeases("postgresql://nobody@127.0.0.1:1/none", "gw-a", 6, timeout_s=2)
    with pytest.raises(LeaseStoreDown):
        await leases.claim(["box-1"])
    await leases.close()
