"""Gateway tokens that carry their own grant, signed: for a gateway that runs apart from
the code that hands out tokens (the cluster's gateway Deployment and the operator).

A token names the scope its usage is charged to (one rollout, or one CoworkEnvironment's
LLM-backed roles), the scope's token budget, the upstream endpoint and model it may call,
and the *name* of the upstream key, never the key: the gateway looks
the key up in its own secrets. The signature (HMAC-SHA256 with a key that only the
gateway and the minting side hold) makes a forged or edited token worthless, and the
same inputs always give the same token, so a controller that mints again after a restart
hands out the same one.

    cwgs.<base64url(JSON claims)>.<base64url(HMAC)>
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass

PREFIX = "cwgs"


@dataclass(frozen=True)
class TokenClaims:
    scope: str  # what usage is charged to, e.g. "<namespace>/<batch>/<rollout id>"
    base_url: str  # the upstream OpenAI base URL
    model: str  # the model the token is pinned to
    key_name: str = ""  # the upstream key's name in the gateway's secrets; "" = none
    role: str = "agent"
    # most tokens the scope may use (signed, so a role cannot raise it); 0 = the gateway's
    # own default (COWORKGYM_ROLLOUT_TOKEN_BUDGET)
    token_budget: int = 0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(signing_key: str, body: str) -> str:
    return _b64(hmac.new(signing_key.encode(), body.encode(), hashlib.sha256).digest())


def mint(signing_key: str, claims: TokenClaims) -> str:
    if not signing_key:
        raise ValueError("a signing key is needed to mint gateway tokens")
    body = _b64(json.dumps(asdict(claims), sort_keys=True, separators=(",", ":")).encode())
    return f"{PREFIX}.{body}.{_mac(signing_key, body)}"


def verify(signing_key: str, token: str) -> TokenClaims | None:
    """The claims of a token this key signed; None for anything else."""
    parts = token.split(".")
    if not signing_key or len(parts) != 3 or parts[0] != PREFIX:
        return None
    _, body, mac = parts
    if not hmac.compare_digest(mac, _mac(signing_key, body)):
        return None
    try:
        raw = json.loads(_unb64(body))
        return TokenClaims(**raw)
    except (ValueError, TypeError):
        return None


__all__ = ["PREFIX", "TokenClaims", "mint", "verify"]
