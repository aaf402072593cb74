"""Stock xiaozhi-esp32 voice boxes: their OTA bootstrap and WebSocket protocol (docs/XIAOZHI.md).

`framing` (pure wire format), `connection` (the box as a DeviceConnection), `ota` (bootstrap),
`emotions` (Action/Sentiment -> the firmware's emotion names), `playback` (the box's queue),
`endpoint` (both plugged into the gateway's WebSocket server).
"""
