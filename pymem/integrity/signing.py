"""The installation's Ed25519 signing key: generated once, kept outside the database.

The private key is a PEM file readable by its owner only (0600, in a 0700 folder); pymem refuses
to use one that others can read. Its public key travels with every checkpoint it signs.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import InvalidArguments


@dataclass(frozen=True)
class SigningKey:
    """An Ed25519 key pair; `public_hex` identifies it."""

    private: Ed25519PrivateKey
    path: Path

    @property
    def public(self) -> Ed25519PublicKey:
        return self.private.public_key()

    @property
    def public_hex(self) -> str:
        return public_bytes(self.public).hex()

    def sign(self, message: bytes) -> bytes:
        return self.private.sign(message)


def public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_public_hex(text: str) -> Ed25519PublicKey:
    """A public key from its 64 hex digits, or from a PEM file's content."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        else:
            key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(text))
    except ValueError as exc:
        raise InvalidArguments("not an Ed25519 public key (64 hex digits or a PEM file)") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidArguments("not an Ed25519 public key")
    return key


def verify_signature(public_hex: str, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def _check_private(path: Path) -> None:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidArguments(f"the signing key {path} is accessible to other users; run `chmod 600 {path}`")


def load_key(path: Path) -> SigningKey:
    """The key at `path`; raises InvalidArguments if it is missing, unreadable or open to others."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InvalidArguments(f"no signing key at {path} (`pymem anchor` creates one)")
    _check_private(path)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except ValueError as exc:
        raise InvalidArguments(f"{path} is not a PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidArguments(f"{path} is not an Ed25519 private key")
    return SigningKey(private=key, path=path)


def load_or_create_key(path: Path) -> SigningKey:
    """The key at `path`, generated (0600, parent folder 0700) the first time."""
    path = Path(path).expanduser()
    if path.exists():
        return load_key(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    # O_EXCL: two processes creating a key at once must not overwrite each other's.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load_key(path)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
        f.flush()
        os.fsync(f.fileno())
    return SigningKey(private=key, path=path)


__all__ = ["SigningKey", "load_key", "load_or_create_key", "load_public_hex", "public_bytes", "verify_signature"]
