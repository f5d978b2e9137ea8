"""Property-based tests of the served OpenAPI spec with schemathesis (its Python API:
schemathesis' pytest plugin does not support this pytest version).

Every documented operation of the app `graphroute serve` runs (the playground's included) -
except POST /index, which starts real indexing jobs and is covered end to end - answers generated requests (valid and invalid) with a documented
status, content type and body schema, and never with a server error.
"""

from __future__ import annotations

import schemathesis
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.playground import mount_playground
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.server.conftest import make_app

TOKEN = "schema-test-token"
EXAMPLES_PER_OPERATION = 12


def test_every_operation_conforms_to_the_schema(engine: GraphRoute) -> None:
    app = make_app(engine, token=TOKEN, default_route="t_route")
    mount_playground(app)
    auth = {"Authorization": f"Bearer {TOKEN}"}  # the schema, like the API it describes, needs the token
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=auth).exclude(method="POST", path="/index")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {
        "POST /query", "GET /routes", "GET /routes/{name}", "GET /plugins", "GET /jobs/{job_id}", "GET /health",
        "GET /playground/info", "GET /playground/routes/{name}", "POST /playground/resolve", "POST /playground/import",
        "POST /playground/query", "POST /playground/ab", "POST /playground/ab/questions",
    }
    for op in operations:

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case) -> None:
            # positive_data_acceptance is off: a schema-valid body can still name a route or
            # an override the server does not have, and that is a documented 400.
            case.call_and_validate(headers=auth, excluded_checks=[positive_data_acceptance])

        check()
