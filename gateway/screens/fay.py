"""Fay's "human" screen messages (REFERENCE.md section 5), built from what the gateway says.

Per spoken sentence: `{"Topic": "human", "Data": {"Key": "audio", "Value", "HttpValue", "Text",
"Time", "Type", "IsFirst", "IsEnd", "Lips": [{"Lip", "Time"}], "Sentiment", "Action"},
"Username"}` so existing Fay avatar clients can point at the gateway. Extra keys (`StreamId`,
`Mouth`) are for our own page; Fay clients ignore them. Transcripts and the end of a reply come
as `Key` `transcript` / `reply_end` (no audio); a memory rule's alert as `Key` `alert` (shown
even when no device of the user could speak it).
"""

from __future__ import annotations

from typing import Any

from gateway.expression.sentence import SentenceExpression

TYPE_REPLY = 2  # Fay: 1 = user question, 2 = reply


def sentence_message(device_id: str, stream_id: int, expr: SentenceExpression, audio_path: str,
                     is_first: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "Key": "audio",
        "Value": audio_path,
        "HttpValue": audio_path,  # made absolute per screen (its Host) when sent
        "Text": expr.display or expr.text,  # the display text: emoji and URLs kept, tags removed
        "Time": round(expr.audio_ms / 1000, 3),
        "Type": TYPE_REPLY,
        "IsFirst": int(is_first),
        "IsEnd": 0,
        "Lips": expr.fay_lips(),
        "Sentiment": expr.sentiment,
        "StreamId": stream_id,
        "Mouth": {"FrameMs": expr.frame_ms, "Values": list(expr.levels)},
    }
    if expr.action is not None:
        data["Action"] = expr.action.to_fay()
    return {"Topic": "human", "Data": data, "Username": device_id}


def text_message(device_id: str, key: str, text: str, *, is_end: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {"Key": key, "Text": text, "Type": 1 if key == "transcript" else TYPE_REPLY}
    if is_end:
        data["IsEnd"] = 1
    return {"Topic": "human", "Data": data, "Username": device_id}


def listen_message(device_id: str, state: str, word: str) -> dict[str, Any]:
    """The device's listen state (`asleep`, `listening`, `woken`; `Word`: the wake word heard)."""
    return {"Topic": "human", "Data": {"Key": "listen", "Text": state, "Word": word}, "Username": device_id}


def alert_message(user_id: str, devices: tuple[str, ...], text: str, severity: str, at: float) -> dict[str, Any]:
    """An alert for the screens of `devices` (all screens when empty); `Username` is the person."""
    data = {"Key": "alert", "Text": text, "Type": TYPE_REPLY, "Severity": severity, "At": at, "Devices": list(devices)}
    return {"Topic": "human", "Data": data, "Username": user_id}


def for_screen(message: dict[str, Any], host: str, scheme: str = "http") -> dict[str, Any]:
    """The message with its audio URL made absolute for a screen that reached us as `host`."""
    data = message["Data"]
    if "HttpValue" not in data or not host:
        return message
    return {**message, "Data": {**data, "HttpValue": f"{scheme}://{host}{data['Value']}"}}
