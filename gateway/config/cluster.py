"""The `cluster:` section: several gateways sharing the MQTT devices (docs/SCALE-OUT.md)."""

from __future__ import annotations

from pydantic import Field, model_validator

from gateway.config.base import _Section


class ClusterConfig(_Section):
    enabled: bool = False  # false: one box, the embedded broker or not, nothing below is used
    id: str = Field("", pattern=r"^[A-Za-z0-9_.-]{0,64}$")  # this gateway's member id; "" = the host name
    heartbeat_s: float = Field(2.0, ge=0.1, le=60)  # how often the member record is re-published
    member_timeout_s: float = Field(6.0, ge=0.3, le=600)  # no heartbeat for this long: the member is gone
    lease_ttl_s: float = Field(6.0, ge=0.3, le=600)  # a device lease's life; renewed every lease_ttl_s / 3

    @model_validator(mode="after")
    def _timeout_above_heartbeat(self) -> "ClusterConfig":
        if self.member_timeout_s < 2 * self.heartbeat_s:
            raise ValueError(f"cluster.member_timeout_s ({self.member_timeout_s:g}) must be at least twice "
                             f"cluster.heartbeat_s ({self.heartbeat_s:g}): one lost heartbeat must not drop a member")
        return self
