"""The failure kinds: the closed set of words an attempt without a usable answer is labelled with."""

from __future__ import annotations

from gateway.core.failures import Failure


def test_each_failure_is_the_word_metrics_logs_and_error_codes_carry() -> None:
    assert [failure.value for failure in Failure] == [
        "timeout", "connect_error", "stream_error", "invalid_response", "circuit_open",
    ]  # fmt: skip
    assert Failure("stream_error") is Failure.STREAM_ERROR
    assert f"outcome={Failure.TIMEOUT}" == "outcome=timeout" and {Failure.CIRCUIT_OPEN: 1}["circuit_open"] == 1
