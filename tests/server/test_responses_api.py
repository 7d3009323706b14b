"""gateway.server.responses_api's refusals: what a stored response may not be asked, and a continuation the store cannot place.

Pass-through, translation, pinning and stored responses end to end are in
test_responses_api_native_e2e.py and test_responses_api_e2e.py; a store that cannot say where a
response lives, with one tenant, in test_redis_refused_e2e.py.
"""

from __future__ import annotations

from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.openai_errors import assert_error
from tests.support.plain_http import AUTH, CONFIG, call
from tests.support.servers import free_port

TWO_TENANTS = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}"


async def test_a_stored_response_is_never_streamed(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    for query in ("stream=true", "stream=True"):
        status, _, body = await call(client, "GET", f"/v1/responses/resp_1?{query}", headers=AUTH)
        assert status == 400, body
        assert_error(body, param="stream", code="unsupported_value")


async def test_an_id_no_response_can_have_is_a_404_without_asking_the_store(gateway: Gateway) -> None:
    client = await gateway(f'memory: {{store: redis, url: "redis://127.0.0.1:{free_port()}/0"}}\nroutes: {{m: {{provider: mock}}}}')
    for response_id in ("resp.1", "x" * 257):
        for method in ("GET", "DELETE"):
            status, _, body = await call(client, method, f"/v1/responses/{response_id}", headers=AUTH)
            assert status == 404, body  # the store is down: asked, it would be a 503
            assert_error(body, param="response_id", code="not_found")


async def test_between_tenants_a_continuation_the_store_cannot_place_is_a_503(gateway: Gateway) -> None:
    """Another tenant's response must never be continued: when the store cannot say whose it is, it is refused."""
    client = await gateway(
        f'{TWO_TENANTS}\nmemory: {{store: redis, url: "redis://127.0.0.1:{free_port()}/0"}}\nroutes: {{m: {{provider: mock}}}}'
    )
    body = {"model": "m", "input": "more", "previous_response_id": "resp_0"}
    status, _, answer = await call(client, "POST", "/v1/responses", json=body, headers=AUTH)
    assert status == 503, answer
    assert_error(answer, code="memory_unavailable")
