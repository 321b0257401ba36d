"""Schemathesis against the publisher's OpenAPI spec: generated valid and invalid requests to
every operation never get a 5xx (the journal is the embedded one, so it is always reachable).

Driven through Hypothesis directly: schemathesis' pytest plug-in (``from_fixture``) does not
run on pytest 9 yet.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from publisher.agent import PublisherAgent
from publisher.api import create_app
from tests.publisher.conftest import AUTH

# Examples per operation and mode: enough for Hypothesis to hit empty, huge, unicode and
# wrong-typed inputs on each operation, while the suite stays around a minute.
EXAMPLES = 40

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_generated_request_gets_a_server_error(
    agent: PublisherAgent, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(agent))
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the spec has an invalid operation: {result}"
        operations.append(result.ok())
    assert len(operations) >= 10
    fuzzed = 0
    for operation in operations:

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:  # type: ignore[type-arg]
            case.call_and_validate(headers=AUTH, checks=[not_a_server_error])

        try:
            run()
        except Unsatisfiable:
            # An operation without parameters or body has no invalid input to generate.
            assert mode is GenerationMode.NEGATIVE, operation.label
            continue
        fuzzed += 1
    # Negative mode: distribute (JSON and upload), queue items, error queue items and clear
    # have inputs to break; the parameterless operations are covered by positive mode.
    assert fuzzed >= (len(operations) if mode is GenerationMode.POSITIVE else 5), fuzzed
