"""The response object under construction (responses.reply): its status and its items' ids."""

from __future__ import annotations

import pytest
from openai.types.responses import Response

from gateway.core.translate.responses.answer import from_chat
from tests.support.responses_translation import (
    CREATED,
    RESPONSE_ID,
    body,
    completion,
    tool_call,
)


@pytest.mark.parametrize(("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")])
def test_a_cut_answer_is_incomplete(finish: str, reason: str) -> None:
    response = from_chat(completion("Once upon", finish=finish), request=body(), response_id=RESPONSE_ID,
                         created_at=CREATED)
    parsed = Response.model_validate(response)
    assert parsed.status == "incomplete"
    assert parsed.incomplete_details is not None and parsed.incomplete_details.reason == reason
    assert response["output"][0]["status"] == "incomplete"


def test_item_ids_follow_the_response_id() -> None:
    answer = completion("hi", finish="tool_calls", tool_calls=[tool_call("c", "f", "{}")])

    def ids(response_id: str) -> list[str]:
        response = from_chat(answer, request=body(), response_id=response_id, created_at=CREATED)
        return [item["id"] for item in response["output"]]

    assert ids("resp_1") == ids("resp_1") == ["msg_1_0", "fc_1_1"]
    assert ids("resp_2") == ["msg_2_0", "fc_2_1"]
