"""The web console at <screen server>/console: login (password.py, sessions.py, throttle.py),
the request guard and routing (server.py), the JSON API over the gateway's own services
(api_devices.py, api_readings.py, api_health.py) and the static pages (static/)."""
