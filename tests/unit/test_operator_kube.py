"""The status write: a merge patch that leaves nothing stale behind."""

from __future__ import annotations

from typing import Any

from coworkgym_operator.core.kube import merge_patch


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def test_a_status_write_removes_what_the_new_status_no_longer_says() -> None:
    before = {
        "phase": "Building",
        "message": "retrying: OOMKilled",
        "loop": {"stage": "builder", "attempt": 2, "builderFeedback": [{"code": "X"}]},
        "conditions": [{"type": "Built", "status": "Unknown"}],
    }
    after = {
        "phase": "Failed",
        "message": "builder failed: OOMKilled",
        "loop": {"attempt": 0, "builderFeedback": []},
        "conditions": [{"type": "Built", "status": "False"}],
    }
    patch = merge_patch(before, after)
    assert patch["loop"]["stage"] is None  # a plain merge of `after` would keep it
    assert apply_merge_patch(before, patch) == after
    assert merge_patch(after, after) == {}
    assert apply_merge_patch({}, merge_patch({}, after)) == after
