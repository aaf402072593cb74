"""Device tokens hashed as mosquitto's password file wants them (the embedded broker checks logins itself)."""

from __future__ import annotations

import base64

from gateway.devices.auth import add_device, broker_logins
from gateway.devices.broker_password import mosquitto_hash
from gateway.devices.database import connect
from gateway.links.mosquitto_files import render_passwd

# written by `mosquitto_passwd -b pw user1 secret` (mosquitto 2.0.11)
MOSQUITTO_PASSWD_LINE = "user1:$7$101$qwQdyLjiHgWzQSoy$hpvLJEG979eXnRpytxmhTfozpPmglFcbUBvMeUOqpDsJzw9KHqJ4AQHPeU9H5ceOfTXQS0Tjyok5IxKXLMcWmg=="

def test_the_hash_is_the_one_mosquitto_passwd_writes():
    salt = base64.b64decode("qwQdyLjiHgWzQSoy")
    assert "user1:" + mosquitto_hash("secret", salt) == MOSQUITTO_PASSWD_LINE
    assert mosquitto_hash("secret") != mosquitto_hash("secret")  # a new salt each time

def test_a_new_token_gets_its_broker_hash_and_an_old_database_the_column(tmp_path):
    import sqlite3

    old = sqlite3.connect(tmp_path / "g.db")  # a registry from before the embedded mosquitto
    old.execute("CREATE TABLE devices (device_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, "
                "name TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL, last_seen REAL)")
    old.execute("INSERT INTO devices VALUES ('old-dev', 'x', '', 0, NULL)")
    old.commit()
    old.close()
    conn = connect(tmp_path / "g.db")
    token = add_device(conn, "new-dev")
    logins = dict(broker_logins(conn))
    assert logins["old-dev"] is None and logins["new-dev"].startswith("$7$101$")
    salt = base64.b64decode(logins["new-dev"].split("$")[3])
    assert mosquitto_hash(token, salt) == logins["new-dev"]

def test_ids_mosquitto_cannot_take_as_a_username_are_left_out_of_the_password_file():
    text = render_passwd("gw-user", "$7$h", [("a:b", "$7$x"), ("plain", "$7$y"), ("old", None)])
    assert text.splitlines() == ["gw-user:$7$h", "plain:$7$y"]
