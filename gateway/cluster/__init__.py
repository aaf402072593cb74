"""Cluster mode for MQTT devices: several gateways behind one external broker share the devices.

`members` is the live member list heard on the broker, `rendezvous` picks each device's owner from
it, `leases` is the per-device fence in PostgreSQL, `directory` is which gateway serves which
device (for the screens, the console and MCP of every gateway), and `node` runs them together for
the MQTT link (gateway/links/mqtt_cluster.py holds the MQTT side). See docs/SCALE-OUT.md.
"""
