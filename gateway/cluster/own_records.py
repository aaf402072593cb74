"""The directory records this member published, per device, and keeping them right.

The lease holder publishes `P/$cluster/devices/<device>` (retained; gateway/cluster/directory.py).
For a WebSocket / CoAP session's device the record says whether the session lives: `session`
true at the take, false when it ends here while this member still holds the lease (never over a
newer holder's record); a holder hearing an older record of its device publishes its own again.
The cluster node (gateway/cluster/node.py) says when; `publish` sends a retained record (nothing
while off the broker).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gateway.cluster.directory import DeviceDirectory, Served

log = logging.getLogger(__name__)


class OwnRecords:
    def __init__(self, me: str, directory: DeviceDirectory, publish: Callable[[str, bytes], None]) -> None:
        self.me = me
        self._directory = directory
        self._publish = publish  # (device_id, record): retained on P/$cluster/devices/<device>
        self._records: dict[str, Served] = {}  # the directory record this member published last, per device

    def publish(self, record: Served, device_id: str) -> None:
        self._records[device_id] = record
        self._publish(device_id, record.encode())

    def session_ended(self, device_id: str, epoch: int) -> None:
        """A session's lease `epoch` ended here: its record says so, unless a newer holder's is known."""
        mine, heard = self._records.pop(device_id, None), self._directory.served(device_id)
        if mine is None or mine.session is None or mine.epoch != epoch:
            return
        if heard is not None and heard.epoch > epoch:
            return  # another member took it since: its record stays
        self.publish(Served(self.me, epoch, mine.since, session=False), device_id)
        del self._records[device_id]  # nothing of this member's to defend any more

    def answer_older(self, device_id: str, held_epoch: int | None) -> None:
        """A record older than the lease this member holds (`held_epoch`; a late `session: false` of
        the member that held it before, published after ours): ours again, so the retained one is right."""
        mine, heard = self._records.get(device_id), self._directory.served(device_id)
        if mine is None or held_epoch is None or held_epoch != mine.epoch:
            return
        if heard is None or heard.epoch < mine.epoch:
            log.info("cluster %s: an older directory record of %s (%s); publishing this member's (epoch %d) again",
                     self.me, device_id, f"{heard.gateway}, epoch {heard.epoch}" if heard else "deleted", mine.epoch)
            self.publish(mine, device_id)
