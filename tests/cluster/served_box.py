"""Two member processes behind a real mosquitto, one emulated MQTT voice box served by one of them.

`box_served_by_one(...)` starts the broker, the members (each with its `extra` config), the rig's
observer and the box; once the box is welcomed and the observer has heard which member serves it,
it yields the rig, the box, that member and the other one; on the way out the box and the rig stop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

from gateway.cli.cluster_rig import ClusterRig
from gateway.cli.cluster_voice_box import ClusterVoiceBox


class ServedBox(NamedTuple):
    rig: ClusterRig
    box: ClusterVoiceBox
    server: str  # the member serving the box
    other: str  # the member that does not


@asynccontextmanager
async def box_served_by_one(tmp_path: Path, postgres_dsn: str, members: list[str], box_id: str,
                            extra: dict[str, dict[str, Any]]) -> AsyncIterator[ServedBox]:
    rig = ClusterRig(tmp_path, postgres_dsn)
    rig.start_broker()
    box = ClusterVoiceBox(box_id)
    try:
        await rig.start_members(members, extra)
        await rig.observe()
        await box.connect("127.0.0.1", rig.broker_port)
        await box.welcomed(timeout=30)
        async with asyncio.timeout(10):  # the observer hears the Welcome beside the box
            while (server := rig.observer.holder_at(box_id, time.monotonic())) is None:
                await asyncio.sleep(0.05)
        (other,) = set(members) - {server}
        yield ServedBox(rig, box, server, other)
    finally:
        await box.close()
        await rig.stop()
