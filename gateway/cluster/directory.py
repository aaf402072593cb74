"""Which gateway serves which device, for every gateway's screens, console and MCP tools.

The lease holder publishes `P/$cluster/devices/<device>` (retained) = {"gateway", "epoch", "since"}
when it takes a device; every gateway subscribes `P/$cluster/devices/+` and `P/+/status`, so any of
them can list every device of the cluster: online or not, and served by which live member. A
record naming a gateway that is no longer a member means nobody serves the device right now
(the next owner overwrites it when it takes the lease).

WebSocket and CoAP devices have no status on the broker: their record says whether their session
lives, `"session": true` from the serving member's Hello, `false` once that session ended there
(published only while that member still held the lease: never over a newer holder's record; a
holder that hears an older record of its device answers with its own, so a late one is healed
within a broker hop). Such a device is online while its record says so and names a live member.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    gateway: str
    epoch: int
    since: float  # unix time the lease was taken
    session: bool | None = None  # a WebSocket / CoAP session: live there, or ended; None: an MQTT device

    def encode(self) -> bytes:
        record: dict[str, object] = {"gateway": self.gateway, "epoch": self.epoch, "since": self.since}
        if self.session is not None:
            record["session"] = self.session
        return json.dumps(record).encode()


@dataclass(frozen=True)
class DeviceEntry:
    device_id: str
    online: bool  # its retained status on the broker; a WebSocket / CoAP device: its session lives
    gateway: str | None  # the live member serving it, None: nobody right now
    epoch: int | None
    since: float | None

    def as_dict(self) -> dict[str, object]:
        return {"device_id": self.device_id, "online": self.online, "gateway": self.gateway,
                "epoch": self.epoch, "since": self.since}


class DeviceDirectory:
    def __init__(self) -> None:
        self._served: dict[str, Served] = {}
        self._online: dict[str, bool] = {}

    def status(self, device_id: str, online: bool) -> None:
        self._online[device_id] = online

    def heard(self, device_id: str, payload: bytes) -> None:
        if not payload:
            self._served.pop(device_id, None)
            return
        try:
            data = json.loads(payload)
            session = data.get("session")
            if session is not None and not isinstance(session, bool):
                raise ValueError(f"session must be true or false, not {session!r}")
            self._served[device_id] = Served(str(data["gateway"]), int(data["epoch"]), float(data["since"]), session)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("cluster: ignored the directory record of device %s: %s", device_id, exc)

    def served(self, device_id: str) -> Served | None:
        """The last record heard for the device: the member that took its lease last, and the epoch."""
        return self._served.get(device_id)

    def online(self) -> list[str]:
        return sorted(d for d, up in self._online.items() if up)

    def entries(self, live_members: tuple[str, ...]) -> list[DeviceEntry]:
        out = []
        for device_id in sorted(set(self._online) | set(self._served)):
            served = self._served.get(device_id)
            if served is not None and served.gateway not in live_members:
                served = None
            online = self._online.get(device_id, False) or (served is not None and served.session is True)
            out.append(DeviceEntry(device_id, online, served and served.gateway, served and served.epoch,
                                   served and served.since))
        return out
