"""Console API for the conversations as they happen (the TalkLog, gateway/console/talk_log.py).

    GET talk?person=P&device=D&n=N   the recent turns, newest first: said, answered, latency_ms,
                                     brain (local / memory / llm), audio (its URL, when kept)
    GET talk/audio?id=ID             the reply's audio as WAV (what the device was sent)
    WS  live                         every turn update as it happens: {"type": "turn", "turn": {...}}
                                     (first {"type": "ready"} once subscribed)

The live socket is opened with the session cookie like any page (gateway/console/server.py
refuses it without one); it is closed with code 4401 when the session ends (logout, expiry, a new
password), checked every CHECK_S seconds and before each update.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.console.routes import ApiError, ApiRequest, FileAnswer, Routes
from gateway.console.talk_log import TalkLog
from gateway.links.base import LinkClosed

if TYPE_CHECKING:
    from gateway.links.web import TextSocket

log = logging.getLogger(__name__)

CHECK_S = 5.0
SESSION_ENDED = 4401
_ID = re.compile(r"[A-Za-z0-9_-]{8,32}")


def _n(request: ApiRequest) -> int:
    n = request.query.get("n", "50")
    if not n.isdigit() or not 1 <= int(n) <= 200:
        raise ApiError(400, "n: a number from 1 to 200", "n")
    return int(n)


class TalkApi:
    def __init__(self, talk: TalkLog) -> None:
        self._talk = talk

    def routes(self) -> Routes:
        return {("GET", "talk"): self.recent, ("GET", "talk/audio"): self.audio}

    async def recent(self, request: ApiRequest) -> dict[str, Any]:
        person, device = request.query.get("person", ""), request.query.get("device", "")
        turns = self._talk.recent(person, device, _n(request))
        return {"person": person, "device": device, "turns": [t.as_dict() for t in turns]}

    async def audio(self, request: ApiRequest) -> FileAnswer:
        turn_id = request.query.get("id", "")
        if not _ID.fullmatch(turn_id):
            raise ApiError(400, "id: a turn's id (see GET talk)", "id")
        turn = self._talk.turn(turn_id)
        if turn is None or not turn.done or not turn.pcm:
            raise ApiError(404, f"no reply audio kept for turn {turn_id} (only the last replies of each device are kept)", "id")
        return FileAnswer("audio/wav", await asyncio.to_thread(turn.wav), f"reply-{turn.device_id}-{turn_id}.wav", inline=True)

    async def live(self, sock: TextSocket, alive: Callable[[], bool], peer: str) -> None:
        """Send every turn update to one console page until it goes or its session ends."""
        with self._talk.listen() as updates:
            reader = asyncio.create_task(self._read(sock, peer), name=f"{peer} live reader")
            try:
                await sock.send(json.dumps({"type": "ready"}))
                while True:
                    getter = asyncio.ensure_future(updates.get())
                    done, _ = await asyncio.wait((getter, reader), timeout=CHECK_S, return_when=asyncio.FIRST_COMPLETED)
                    if getter not in done:
                        getter.cancel()
                    if reader in done:
                        return  # the page went away
                    if not alive():
                        log.info("%s: live updates ended: the session ended", peer)
                        await sock.close(SESSION_ENDED, "session ended: log in again")
                        return
                    if getter in done:
                        await sock.send(json.dumps({"type": "turn", "turn": getter.result()}, ensure_ascii=False))
            except LinkClosed:
                return
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    async def _read(self, sock: TextSocket, peer: str) -> None:
        """Until the page goes; it has nothing to say (what it sends is logged and ignored)."""
        try:
            while True:
                text = await sock.receive()
                log.warning("%s: bad-request: the live channel takes no messages, got %.60r (ignored)", peer, text)
        except LinkClosed:
            return
