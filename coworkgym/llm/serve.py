"""The LLM gateway as a service: ``python -m coworkgym.llm.serve`` (the chart's gateway
Deployment). It answers signed tokens (coworkgym.llm.signed_tokens), minted by the operator
per rollout and per CoworkEnvironment: the token names the scope its usage is charged to,
that scope's token budget, the upstream and the *name* of its key; the keys themselves are
files in a folder mounted from a Secret that only this pod mounts. The ledgers are in
memory: a restarted gateway (or each of several replicas) counts each scope afresh.

Environment:
    COWORKGYM_GATEWAY_PORT              port on all addresses (default 8000)
    COWORKGYM_GATEWAY_SIGNING_KEY_FILE  the HMAC key the operator signs tokens with
    COWORKGYM_GATEWAY_KEYS_DIR          one file per upstream key, named as in the tokens
    COWORKGYM_ROLLOUT_TOKEN_BUDGET      most tokens per scope whose token names no budget
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import structlog

from .gateway import Gateway, Grant, Route
from .signed_tokens import verify

log = structlog.get_logger(__name__)
_KEY_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def signed_resolver(signing_key: str, keys_dir: Path | None) -> Callable[[str], Grant | None]:
    def resolve(token: str) -> Grant | None:
        claims = verify(signing_key, token)
        if claims is None:
            return None
        api_key = "EMPTY"
        if claims.key_name:
            path = keys_dir / claims.key_name if keys_dir is not None else None
            if path is None or not _KEY_NAME.match(claims.key_name) or not path.is_file():
                log.warning("token names an unknown upstream key", key=claims.key_name)
                return None
            api_key = path.read_text().strip()
        route = Route(base_url=claims.base_url, model=claims.model, api_key=api_key)
        budget = claims.token_budget if claims.token_budget > 0 else None
        return Grant(claims.scope, claims.role, route, token_budget=budget)

    return resolve


def main() -> None:
    env = os.environ
    key_file = Path(env.get("COWORKGYM_GATEWAY_SIGNING_KEY_FILE", "/etc/cowork-gym/signing/key"))
    signing_key = key_file.read_text().strip()
    if not signing_key:
        raise SystemExit(f"{key_file} is empty: the gateway needs the token signing key")
    keys = env.get("COWORKGYM_GATEWAY_KEYS_DIR")
    gateway = Gateway(
        token_budget=int(env.get("COWORKGYM_ROLLOUT_TOKEN_BUDGET", 2_000_000)),
        host="0.0.0.0",
        port=int(env.get("COWORKGYM_GATEWAY_PORT", 8000)),
        resolve=signed_resolver(signing_key, Path(keys) if keys else None),
    ).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("llm gateway serving", port=gateway.port)
    stop.wait()
    gateway.close()


if __name__ == "__main__":
    main()
