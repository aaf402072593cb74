"""TLS for the screen server: browsers allow the microphone only on secure pages, so a browser
voice box on another LAN machine needs https. Without a certificate of your own, the gateway
makes a self-signed one once (the browser asks to accept it on first visit).
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import ssl
from pathlib import Path

from gateway.errors import ConfigError

log = logging.getLogger(__name__)


def _lan_addresses() -> list[str]:
    addresses = {"127.0.0.1"}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET address: no packet is sent, only the route is chosen
            addresses.add(s.getsockname()[0])
    except OSError:
        pass
    return sorted(addresses)


def make_self_signed(cert: Path, key: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    host = socket.gethostname()
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    alt = [x509.DNSName(host), x509.DNSName("localhost")] + [
        x509.IPAddress(ipaddress.ip_address(a)) for a in _lan_addresses()]
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=3650))
                   .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                   .sign(private, hashes.SHA256()))
    cert.parent.mkdir(parents=True, exist_ok=True)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    key.unlink(missing_ok=True)  # created owner-only, never readable by others for a moment
    with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(pem)
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    log.info("screens: made a self-signed certificate %s for %s", cert, ", ".join([host, "localhost", *_lan_addresses()]))


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server TLS context from `cert`/`key`, creating a self-signed pair when both are missing."""
    if not cert.exists() and not key.exists():
        make_self_signed(cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"screens.cert / screens.key: cannot load {cert} and {key}: {exc}") from None
    return context
