"""Which gateway serves which device, for every gateway's screens, console and MCP tools.

The lease holder publishes `P/$cluster/devices/<device>` (retained) = {"gateway", "epoch", "since"}
when it takes a device; every gateway subscribes `P/$cluster/devices/+` and `P/+/status`, so any of
them can list every device of the cluster: online or not, and served by which live member. A
record naming a gateway that is no longer a member means nobody serves the device right now
(the next owner overwrites it when it takes the lease).
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

    def encode(self) -> bytes:
        return json.dumps({"gateway": self.gateway, "epoch": self.epoch, "since": self.since}).encode()


@dataclass(frozen=True)
class DeviceEntry:
    device_id: str
    online: bool  # its retained status on the broker
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
            self._served[device_id] = Served(str(data["gateway"]), int(data["epoch"]), float(data["since"]))
        except (ValueError, TypeError, KeyError) as exc:
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
            out.append(DeviceEntry(device_id, self._online.get(device_id, False), served and served.gateway,
                                   served and served.epoch, served and served.since))
        return out
