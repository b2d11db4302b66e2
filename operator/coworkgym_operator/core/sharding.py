"""Label-sharded replicas: each operator replica holds the objects of one shard.

One replica's memory and event rate bound how many environments it can hold. With
``COWORKGYM_SHARD`` set (the chart's ``operator.shards``: one Deployment per shard), a
replica asks the API server only for objects labelled ``coworkgym.dev/shard=<its shard>``:
the selector is on every watch it opens (kopf's server-side label selectors), so the
objects of other shards never reach its memory. Its children carry the label of their
owner (builders.child_metadata, and the pod templates), so they come back to it.

A user labels what they create; a SynthesisCampaign spreads its children over
``spec.shards``. Without ``COWORKGYM_SHARD`` the operator holds every object, labelled or
not. kopf's peering objects are never filtered: the replicas of a shard meet there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import kopf

LABEL_SHARD = "coworkgym.dev/shard"
# a label value: at most 63 characters, alphanumerics with - _ . inside
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


def shard_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """This replica's shard (``COWORKGYM_SHARD``), or None: every object. A value that
    cannot be a label value is refused at start-up, naming the variable."""
    value = (os.environ if env is None else env).get("COWORKGYM_SHARD", "").strip()
    if not value:
        return None
    if not _VALUE.match(value):
        raise ValueError(
            f"COWORKGYM_SHARD={value!r} is not a label value (up to 63 letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit)"
        )
    return value


def watch_only_shard(settings: kopf.OperatorSettings, shard: str | None) -> None:
    """Put ``coworkgym.dev/shard=<shard>`` on every watch but the peering's."""
    if shard is None:
        return
    settings.watching.label_selectors[lambda resource: resource.group != "kopf.dev"] = (
        f"{LABEL_SHARD}={shard}"
    )


def inherited(owner_labels: Mapping[str, str] | None) -> dict[str, str]:
    """The shard label a child takes from its owner (none where the owner has none)."""
    shard = (owner_labels or {}).get(LABEL_SHARD)
    return {LABEL_SHARD: shard} if shard else {}


__all__ = ["LABEL_SHARD", "inherited", "shard_from_env", "watch_only_shard"]
