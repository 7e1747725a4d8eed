"""Signed tokens: every service call carries one, and its verified claims are the call's Context.

A token is a JWT signed with HS256 (a shared secret, PYMEM_JWT_KEY) or, as an option, RS256 or
EdDSA (the issuer's public key, PYMEM_JWT_PUBLIC_KEY). Exactly one algorithm is accepted per
service: the one its key is for. `alg: none`, any other algorithm, a bad signature, an expired or
not-yet-valid token, another audience or issuer (when configured), or claims that do not make a
Context are refused with Unauthenticated and a stable code.

Claims: `tenant` and `actor` (required), `adapter` (optional: the agent acting), `scope` (optional:
the authorised scope object), `read_adapters` (optional: the read allow-list), `exp` (required),
`nbf`/`iat` (checked when present), `aud`/`iss` (checked when configured; a token naming an
audience is refused by a service that has none), `role` (optional, read by the memory inspector
only: `auditor` reads the audit views and no content). Nothing else in a request can say who acts.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from ..config import environment
from ..context import Context
from ..errors import ContextError, InvalidArguments, Unauthenticated

__all__ = ["TokenVerifier", "mint_token", "context_from_claims", "MIN_SECRET_BYTES", "MIN_RSA_BITS",
           "LEEWAY_SECONDS", "IDENTITY_CLAIMS", "ROLES"]

#: An HS256 secret shorter than the hash (RFC 7518, section 3.2) is refused.
MIN_SECRET_BYTES = 32
MIN_RSA_BITS = 2048
#: Clock skew tolerated on exp, nbf and iat.
LEEWAY_SECONDS = 30
#: The claims that make the Context; the same names are refused anywhere in a request body.
IDENTITY_CLAIMS = ("tenant", "actor", "adapter", "scope", "read_adapters")
DEFAULT_TTL = 3600
#: The values of the optional `role` claim (the memory inspector's; absent means operator).
ROLES = ("operator", "auditor")


def _secret(value: str | bytes, what: str = "PYMEM_JWT_KEY") -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(raw) < MIN_SECRET_BYTES:
        raise InvalidArguments(f"{what} must be at least {MIN_SECRET_BYTES} bytes (got {len(raw)}); "
                               "generate one with: python -c \"import secrets; print(secrets.token_urlsafe(48))\"")
    return raw


def _pem(value: str | bytes) -> bytes:
    """PEM text as given, or read from the file it names."""
    text = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if text.lstrip().startswith(b"-----BEGIN"):
        return text
    path = Path(os.fsdecode(text).strip()).expanduser()
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidArguments(f"cannot read the key file {str(path)[:200]!r}: {exc.strerror}") from None


def _algorithm_for(key: Any, what: str) -> str:
    if isinstance(key, (rsa.RSAPublicKey, rsa.RSAPrivateKey)):
        if key.key_size < MIN_RSA_BITS:
            raise InvalidArguments(f"{what} is a {key.key_size}-bit RSA key; at least {MIN_RSA_BITS} bits are required")
        return "RS256"
    if isinstance(key, (ed25519.Ed25519PublicKey, ed25519.Ed25519PrivateKey)):
        return "EdDSA"
    raise InvalidArguments(f"{what} must be an RSA or Ed25519 key in PEM form")


def _public_key(value: str | bytes) -> Any:
    try:
        return serialization.load_pem_public_key(_pem(value))
    except ValueError:
        raise InvalidArguments("PYMEM_JWT_PUBLIC_KEY is not a PEM public key") from None


def _signing_key(value: Any) -> tuple[Any, str]:
    """(key, algorithm) for minting: a secret for HS256, or a PEM private key (text, path or object)."""
    if isinstance(value, (rsa.RSAPrivateKey, ed25519.Ed25519PrivateKey)):
        return value, _algorithm_for(value, "the private key")
    if isinstance(value, (str, bytes)):
        raw = value.encode("utf-8") if isinstance(value, str) else value
        if raw.lstrip().startswith(b"-----BEGIN"):
            try:
                key = serialization.load_pem_private_key(raw, password=None)
            except (ValueError, TypeError):
                raise InvalidArguments("the private key is not an unencrypted PEM private key") from None
            return key, _algorithm_for(key, "the private key")
        return _secret(raw), "HS256"
    raise InvalidArguments("the signing key must be a secret string, PEM text or a private key object")


def context_from_claims(claims: Mapping[str, Any]) -> Context:
    """The Context verified claims stand for; Unauthenticated("token_claims") when they make none."""
    for name in ("tenant", "actor"):
        if not isinstance(claims.get(name), str) or not claims[name]:
            raise Unauthenticated("token_claims", f"the token has no {name} claim (a non-empty string)")
    # Each optional claim is absent or of its own type: a falsy value of another type ("", [], 0,
    # null) must not read as "none", which would widen the token to the whole tenant (scope) or
    # make it the operator (adapter).
    if "adapter" in claims and (not isinstance(claims["adapter"], str) or not claims["adapter"]):
        raise Unauthenticated("token_claims", "the token's adapter claim must be a non-empty string "
                              "(leave it out for the operator)")
    if "scope" in claims and not isinstance(claims["scope"], Mapping):
        raise Unauthenticated("token_claims", "the token's scope claim must be an object of axis -> value "
                              "(leave it out for the whole tenant)")
    if "read_adapters" in claims and not isinstance(claims["read_adapters"], list):
        raise Unauthenticated("token_claims", "the token's read_adapters claim must be a list of adapter names "
                              "(leave it out for no filter)")
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, (int, float))
                               or not math.isfinite(value)):
            raise Unauthenticated("token_claims", f"the token's {name} claim must be a number of seconds")
    try:
        return Context(tenant=claims["tenant"], actor=claims["actor"], adapter=claims.get("adapter"),
                       scope=claims.get("scope", {}), read_adapters=claims.get("read_adapters"))
    except ContextError as exc:
        raise Unauthenticated("token_claims", f"the token's claims do not make a context: {exc}") from None


@dataclass(frozen=True)
class TokenVerifier:
    """Verifies a service's tokens: one algorithm, one key, optional audience and issuer."""

    algorithm: str
    key: Any
    audience: str | None = None
    issuer: str | None = None
    leeway: int = LEEWAY_SECONDS

    @classmethod
    def hs256(cls, secret: str | bytes, *, audience: str | None = None, issuer: str | None = None) -> TokenVerifier:
        return cls("HS256", _secret(secret), audience or None, issuer or None)

    @classmethod
    def public_key(cls, pem: str | bytes, *, audience: str | None = None,
                   issuer: str | None = None) -> TokenVerifier:
        """RS256 or EdDSA, from the issuer's public key (PEM text or a file holding it)."""
        key = _public_key(pem)
        return cls(_algorithm_for(key, "PYMEM_JWT_PUBLIC_KEY"), key, audience or None, issuer or None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenVerifier:
        """PYMEM_JWT_KEY (HS256) or PYMEM_JWT_PUBLIC_KEY (RS256/EdDSA), PYMEM_JWT_AUDIENCE, PYMEM_JWT_ISSUER.

        Refuses to build without a key, with a short secret, or with both kinds of key set.
        """
        env = environment() if environ is None else environ
        secret = env.get("PYMEM_JWT_KEY", "")
        public = env.get("PYMEM_JWT_PUBLIC_KEY", "").strip()
        audience = env.get("PYMEM_JWT_AUDIENCE", "").strip() or None
        issuer = env.get("PYMEM_JWT_ISSUER", "").strip() or None
        if secret and public:
            raise InvalidArguments("set PYMEM_JWT_KEY (HS256) or PYMEM_JWT_PUBLIC_KEY (RS256/EdDSA), not both")
        if public:
            return cls.public_key(public, audience=audience, issuer=issuer)
        if not secret:
            raise InvalidArguments("PYMEM_JWT_KEY is not set: the service verifies a signed token on every call "
                                   "and will not start without a key (or PYMEM_JWT_PUBLIC_KEY)")
        return cls.hs256(secret, audience=audience, issuer=issuer)

    def claims(self, token: str | None) -> dict[str, Any]:
        """The verified claims of `token`; raises Unauthenticated with a stable code."""
        if not token:
            raise Unauthenticated("token_missing", "no token: send Authorization: Bearer <token>")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("token_malformed", "the token is not a well-formed JWT") from None
        alg = header.get("alg")
        if alg != self.algorithm:
            shown = alg[:20] if isinstance(alg, str) else type(alg).__name__
            raise Unauthenticated("token_algorithm", f"the token's algorithm {shown!r} is not accepted here "
                                  f"(only {self.algorithm})")
        try:
            return jwt.decode(token, self.key, algorithms=[self.algorithm], audience=self.audience,
                              issuer=self.issuer, leeway=self.leeway,
                              options={"require": ["exp"], "verify_sub": False, "verify_jti": False})
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("token_expired", "the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("token_not_yet_valid", "the token is not valid yet (nbf or iat)") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated("token_audience", "the token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("token_issuer", "the token is from another issuer") from None
        except jwt.MissingRequiredClaimError as exc:
            code = {"aud": "token_audience", "iss": "token_issuer"}.get(exc.claim, "token_claims")
            raise Unauthenticated(code, f"the token has no {exc.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise Unauthenticated("token_bad_signature", "the token's signature does not verify") from None
        except jwt.InvalidAlgorithmError:
            raise Unauthenticated("token_algorithm", f"only {self.algorithm} tokens are accepted here") from None
        except jwt.PyJWTError:
            raise Unauthenticated("token_malformed", "the token is not a well-formed JWT") from None

    def verify(self, token: str | None) -> Context:
        """The Context a valid token stands for."""
        return context_from_claims(self.claims(token))


def mint_token(key: Any, *, tenant: str, actor: str, adapter: str | None = None,
               scope: Mapping[str, str] | None = None, read_adapters: list[str] | None = None,
               ttl: int = DEFAULT_TTL, audience: str | None = None, issuer: str | None = None,
               not_before: int | None = None, now: int | None = None, role: str | None = None) -> str:
    """A signed token for one context, valid `ttl` seconds from now.

    `key`: the HS256 secret (PYMEM_JWT_KEY), or a PEM private key (text, or a key object) for
    RS256/EdDSA. `role`: the inspector's role claim (operator or auditor). The claims are checked
    as the service will check them, so a token that mints is a token the service accepts (until it
    expires).
    """
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= 366 * 86400:
        raise InvalidArguments("ttl must be a whole number of seconds between 1 and 366 days")
    signing_key, algorithm = _signing_key(key)
    issued = int(time.time()) if now is None else now
    claims: dict[str, Any] = {"tenant": tenant, "actor": actor, "iat": issued, "exp": issued + ttl}
    if adapter is not None:
        claims["adapter"] = adapter
    if scope:
        claims["scope"] = dict(scope)
    if read_adapters is not None:
        claims["read_adapters"] = list(read_adapters)
    if audience:
        claims["aud"] = audience
    if issuer:
        claims["iss"] = issuer
    if not_before is not None:
        claims["nbf"] = not_before
    if role is not None:
        if role not in ROLES:
            raise InvalidArguments(f"role must be one of {', '.join(ROLES)}")
        claims["role"] = role
    try:
        context_from_claims(claims)
    except Unauthenticated as exc:
        raise InvalidArguments(str(exc)) from None
    return jwt.encode(claims, signing_key, algorithm=algorithm)
