"""The playground's endpoints against their OpenAPI schema with schemathesis, as
tests/server/test_openapi.py checks the rest of the API: generated requests, valid and
invalid, get a documented status and body, never a server error."""

from __future__ import annotations

import schemathesis
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.playground import mount_playground
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.server.conftest import engine, make_app, routes_dir  # noqa: F401 (fixtures)

TOKEN = "schema-test-token"
EXAMPLES_PER_OPERATION = 12


def test_playground_operations_conform_to_the_schema(engine: GraphRoute) -> None:  # noqa: F811
    app = make_app(engine, token=TOKEN, default_route="t_route")
    mount_playground(app)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex="^/playground/")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} == {
        "GET /playground/info", "GET /playground/routes/{name}", "POST /playground/resolve",
        "POST /playground/import", "POST /playground/query", "POST /playground/ab", "POST /playground/ab/questions",
    }
    for op in operations:

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case) -> None:
            # a schema-valid body can still name a route or a stage the server does not have (400)
            case.call_and_validate(
                headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=[positive_data_acceptance]
            )

        check()
