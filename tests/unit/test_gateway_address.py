"""The gateway URL handed to stage and rollout pods names an address, never a host name
(those pods get no DNS)."""

from __future__ import annotations

import pytest

from coworkgym_operator.core.gateway_address import by_address


def test_a_host_name_becomes_its_address() -> None:
    assert by_address("http://localhost:8000/v1") == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize("url", ["http://10.96.0.7:8000/v1", "http://[::1]:8000/v1", ""])
def test_an_address_or_no_url_is_left_as_it_is(url: str) -> None:
    assert by_address(url) == url
