"""Ed25519 signatures on a trace's seal: optional provenance for a finished run.

A signed run's terminal record carries ``data.key_id`` (the SHA-256 of the raw 32-byte public
key, hex), written before the record is sealed, and ``data.signature``: the Ed25519 signature
(hex) of ``b"worldsim.trace-seal/1 " + seal``, filled in after sealing (the seal rule leaves it
out). The prefix keeps a trace key from signing anything that is not a seal. What a signature
proves, and what it does not, is in docs/trace-format.md ("What a trace proves").

Keys are PEM files: the private key PKCS#8 and unencrypted (``worldsim keygen`` writes one),
the public key SubjectPublicKeyInfo. ``cryptography`` is imported when a key is loaded, so
commands that do not sign start without it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from worldsim.domain.errors import ConfigError
from worldsim.domain.paths import missing_file

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["PublicKey", "Signer", "key_id", "load_public_key", "load_signer", "new_key_pair"]

_DOMAIN = b"worldsim.trace-seal/1 "


def key_id(raw_public: bytes) -> str:
    """A key's fingerprint: the SHA-256 (hex) of its raw 32-byte Ed25519 public key."""
    return hashlib.sha256(raw_public).hexdigest()


def _message(seal: str) -> bytes:
    return _DOMAIN + seal.encode("ascii")


@dataclass(frozen=True, slots=True)
class Signer:
    """An Ed25519 private key that signs seals; its repr never shows the key."""

    key_id: str
    _key: Ed25519PrivateKey

    def __repr__(self) -> str:
        return f"Signer(key_id={self.key_id!r})"

    def sign(self, seal: str) -> str:
        """The signature (hex) of a seal."""
        return self._key.sign(_message(seal)).hex()


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An Ed25519 public key that checks signatures of seals."""

    raw: bytes

    @property
    def key_id(self) -> str:
        return key_id(self.raw)

    def verifies(self, seal: str, signature: str) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(
                bytes.fromhex(signature), _message(seal)
            )
        except (InvalidSignature, ValueError):
            return False
        return True


def _read_key_file(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise missing_file(path, what)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", file=path) from None


def load_signer(path: str | Path) -> Signer:
    """Read an unencrypted PKCS#8 PEM Ed25519 private key; anything else is a ConfigError
    naming the file."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    p = Path(path)
    data = _read_key_file(p, "signing key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise ConfigError("the signing key is encrypted; give an unencrypted key", file=p) from None
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError("not a PEM private key (PKCS#8)", file=p) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"not an Ed25519 key ({type(key).__name__})", file=p)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return Signer(key_id(raw), key)


def load_public_key(path: str | Path) -> PublicKey:
    """Read a PEM Ed25519 public key; anything else is a ConfigError naming the file."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    p = Path(path)
    data = _read_key_file(p, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError("not a PEM public key", file=p) from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"not an Ed25519 key ({type(key).__name__})", file=p)
    return PublicKey(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def new_key_pair() -> tuple[bytes, bytes, str]:
    """A fresh key pair from the operating system's randomness (a signing key must not be
    reproducible from a seed): (private PEM, public PEM, key id)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key()
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return private, pem, key_id(raw)
