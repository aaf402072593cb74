"""Edge voice gateway: bridges ESP32 voice boxes, robots and sensors to offline speech and memory."""

__version__ = "0.1.0"
