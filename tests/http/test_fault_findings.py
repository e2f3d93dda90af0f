"""Regression tests for what the fault tests found, each small and direct."""

from __future__ import annotations

from gateway.agent.events import Finished, TextDelta, Usage
from gateway.wire.responses_output import ResponseBuilder
from gateway.wire.responses_request import parse_responses_request


def test_one_huge_text_delta_becomes_several_short_responses_delta_events():
    request = parse_responses_request({"input": "hi"})
    builder = ResponseBuilder(request, model="m")
    events = builder.start() + builder.feed(TextDelta("y" * 10_000)) + builder.feed(Usage(1, 1))
    events += builder.feed(Finished("stop")) + builder.finish()
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert [len(d) for d in deltas] == [4096, 4096, 1808]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "y" * 10_000
