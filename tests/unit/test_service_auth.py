"""Tokens: the key the service needs, what it refuses (with which code), and what the claims become."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from helpers.service import KEY, token

from pymem import Context, InvalidArguments
from pymem.errors import Unauthenticated
from pymem.server.app import build_app
from pymem.service.auth import MIN_SECRET_BYTES, TokenVerifier, mint_token

KEY_ENV = ("PYMEM_JWT_KEY", "PYMEM_JWT_PUBLIC_KEY", "PYMEM_JWT_AUDIENCE", "PYMEM_JWT_ISSUER")


@pytest.fixture
def no_key_env(monkeypatch):
    for name in KEY_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _unsigned(payload: dict, alg: str = "none") -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': alg, 'typ': 'JWT'})}.{part(payload)}."


def _claims(**extra) -> dict:
    now = int(time.time())
    return {"tenant": "acme", "actor": "alice", "iat": now, "exp": now + 600, **extra}


# -- the key --------------------------------------------------------------------------------------

def test_the_app_refuses_to_build_without_a_key(no_key_env):
    with pytest.raises(InvalidArguments, match="PYMEM_JWT_KEY is not set"):
        build_app()


@pytest.mark.parametrize("length", [0, 1, 16, MIN_SECRET_BYTES - 1])
def test_the_app_refuses_a_short_key(no_key_env, length):
    no_key_env.setenv("PYMEM_JWT_KEY", "x" * length)
    with pytest.raises(InvalidArguments, match=r"PYMEM_JWT_KEY (must be at least 32 bytes|is not set)"):
        build_app()


def test_the_app_builds_with_a_key_of_adequate_length(no_key_env):
    no_key_env.setenv("PYMEM_JWT_KEY", "x" * MIN_SECRET_BYTES)
    app = build_app()  # the store is opened when the app starts, not here
    paths = {getattr(r, "path", None) for r in app.routes}
    assert {"/v1/handshake", "/v1/call", "/healthz", "/readyz", "/openapi.json", "/mcp"} <= paths


def test_both_kinds_of_key_are_refused(no_key_env, tmp_path):
    pem = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    no_key_env.setenv("PYMEM_JWT_KEY", KEY)
    no_key_env.setenv("PYMEM_JWT_PUBLIC_KEY", pem.decode())
    with pytest.raises(InvalidArguments, match="not both"):
        TokenVerifier.from_env()


def test_a_small_rsa_key_is_refused():
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    pem = small.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(InvalidArguments, match="2048"):
        TokenVerifier.public_key(pem)


# -- what is refused, and with which code -----------------------------------------------------------

VERIFIER = TokenVerifier.hs256(KEY, audience="pymem-test", issuer="https://issuer.test")
GOOD = {"aud": "pymem-test", "iss": "https://issuer.test"}
# Tokens are minted when a test runs, never at import: a suite that runs longer than a token's
# lifetime must not see them expire.
MATRIX = [
    ("missing", None, "token_missing"),
    ("empty", "", "token_missing"),
    ("not a JWT", "not-a-token", "token_malformed"),
    ("bad signature", lambda: token(key="another-key-that-is-long-enough-0123456789", **GOOD), "token_bad_signature"),
    ("alg none", lambda: _unsigned(_claims(**GOOD)), "token_algorithm"),
    ("alg None spelled differently", lambda: _unsigned(_claims(**GOOD), alg="None"), "token_algorithm"),
    ("wrong algorithm HS512", lambda: token(algorithm="HS512", **GOOD), "token_algorithm"),
    ("expired", lambda: token(ttl=-120, **GOOD), "token_expired"),
    ("not yet valid (nbf)", lambda: token(nbf=int(time.time()) + 3600, **GOOD), "token_not_yet_valid"),
    ("not yet valid (iat)", lambda: token(iat=int(time.time()) + 3600, ttl=7200, **GOOD), "token_not_yet_valid"),
    ("wrong audience", lambda: token(aud="someone-else", iss=GOOD["iss"]), "token_audience"),
    ("no audience", lambda: token(iss=GOOD["iss"]), "token_audience"),
    ("wrong issuer", lambda: token(aud=GOOD["aud"], iss="https://elsewhere.test"), "token_issuer"),
    ("no exp", lambda: jwt.encode({"tenant": "acme", "actor": "alice", **GOOD}, KEY, algorithm="HS256"), "token_claims"),
    ("no tenant", lambda: token(tenant=None, **GOOD), "token_claims"),
    ("no actor", lambda: token(actor=None, **GOOD), "token_claims"),
    ("scope not flat", lambda: token(scope={"project": {"nested": "x"}}, **GOOD), "token_claims"),
    ("tenant with a control character", lambda: token(tenant="ac\u202eme", **GOOD), "token_claims"),
]


@pytest.mark.parametrize("tok,code", [(t, c) for _, t, c in MATRIX], ids=[n for n, _, _ in MATRIX])
def test_the_auth_matrix(tok, code):
    with pytest.raises(Unauthenticated) as info:
        VERIFIER.verify(tok() if callable(tok) else tok)
    assert info.value.code == code


def test_a_valid_token_is_its_context():
    tok = token(adapter="claude-code", scope={"project": "billing"}, read_adapters=["claude-code"], **GOOD)
    assert VERIFIER.verify(tok) == Context(tenant="acme", actor="alice", adapter="claude-code",
                                           scope={"project": "billing"}, read_adapters=("claude-code",))


def test_a_token_naming_an_audience_is_refused_where_none_is_configured():
    with pytest.raises(Unauthenticated) as info:
        TokenVerifier.hs256(KEY).verify(token(aud="pymem-test"))
    assert info.value.code == "token_audience"


def test_rs256_and_eddsa_verify_with_the_public_key_and_refuse_the_key_as_an_hmac_secret():
    for private in (rsa.generate_private_key(public_exponent=65537, key_size=2048), ed25519.Ed25519PrivateKey.generate()):
        public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        verifier = TokenVerifier.public_key(public_pem)
        private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())
        good = mint_token(private_pem, tenant="acme", actor="alice")
        assert verifier.verify(good).tenant == "acme"
        assert jwt.get_unverified_header(good)["alg"] == verifier.algorithm
        # the classic confusion: an HS256 token whose "secret" is the public key text
        forged = _hs256_with(public_pem, _claims())
        with pytest.raises(Unauthenticated) as info:
            verifier.verify(forged)
        assert info.value.code == "token_algorithm"
        with pytest.raises(Unauthenticated) as info:  # and an HS256 service does not take their tokens
            TokenVerifier.hs256(KEY).verify(good)
        assert info.value.code == "token_algorithm"


def _hs256_with(secret: bytes, payload: dict) -> str:
    """HS256 signed by hand (PyJWT refuses a PEM as an HMAC secret, which is the point of the attack)."""
    import hashlib
    import hmac

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")
    signing = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + b"." + b64(json.dumps(payload).encode())
    return (signing + b"." + b64(hmac.new(secret, signing, hashlib.sha256).digest())).decode()


# -- minting ------------------------------------------------------------------------------------------

def test_a_minted_token_verifies_and_carries_the_claims():
    tok = mint_token(KEY, tenant="acme", actor="bob", adapter="codex", scope={"project": "x"}, ttl=60,
                     audience="pymem-test", issuer="https://issuer.test")
    ctx = VERIFIER.verify(tok)
    assert (ctx.tenant, ctx.actor, ctx.adapter, dict(ctx.scope)) == ("acme", "bob", "codex", {"project": "x"})
    claims = VERIFIER.claims(tok)
    assert claims["exp"] - claims["iat"] == 60


def test_a_minted_role_is_a_claim_the_service_ignores():
    aud = dict(audience="pymem-test", issuer="https://issuer.test")
    tok = mint_token(KEY, tenant="acme", actor="audrey", role="auditor", ttl=60, **aud)
    assert VERIFIER.claims(tok)["role"] == "auditor"
    assert VERIFIER.verify(tok) == Context(tenant="acme", actor="audrey")
    assert "role" not in VERIFIER.claims(mint_token(KEY, tenant="acme", actor="alice", ttl=60, **aud))


@pytest.mark.parametrize("kwargs,match", [
    (dict(key="short"), "at least 32 bytes"),
    (dict(actor=""), "actor"),
    (dict(tenant="a\u200bb"), "tenant"),
    (dict(ttl=0), "ttl"),
    (dict(role="admin"), "role"),
])
def test_minting_refuses_what_the_service_would_refuse(kwargs, match):
    args = dict(key=KEY, tenant="acme", actor="alice")
    args.update(kwargs)
    key = args.pop("key")
    with pytest.raises(InvalidArguments, match=match):
        mint_token(key, **args)


def test_the_auth_matrix_holds_in_a_suite_slower_than_a_token_lifetime(monkeypatch):
    """The matrix run 15 minutes after the module was imported (a loaded machine, a slow suite)
    still gets each case's own code, not token_expired: no token is minted at import."""
    import datetime as dt

    later = 900.0
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + later)

    class Later(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime.now(tz) + dt.timedelta(seconds=later)

    monkeypatch.setattr(jwt.api_jwt, "datetime", Later)
    for name, tok, code in MATRIX:
        with pytest.raises(Unauthenticated) as info:
            VERIFIER.verify(tok() if callable(tok) else tok)
        assert info.value.code == code, name
