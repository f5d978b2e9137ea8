"""The README's example on route2_local: a five-document handbook, one document saying who
approves travel requests in other words than the question's, indexed by the real Indexer
(spaCy, the packaged embedding model) into the embedded store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.engine import GraphRoute

HANDBOOK = {
    "travel.md": "# Travel policy\n\nEmployees book business trips through the company travel portal.\n"
    "Requests for business travel are approved by the head of the employee's department.\n"
    "Trips abroad also need a sign-off from the finance department.\n",
    "leave.md": "# Leave policy\n\nEvery employee receives twenty-five days of paid annual leave.\n"
    "Leave is requested in the HR system at least two weeks in advance.\n",
    "security.md": "# Security handbook\n\nLaptops must be encrypted and locked when unattended.\n"
    "Security incidents are reported to the IT service desk immediately.\n",
    "expenses.md": "# Expenses\n\nMeals during business trips are reimbursed up to fifty euros a day.\n"
    "Expense claims are filed in the finance portal with scanned receipts.\n",
    "onboarding.md": "# Onboarding\n\nNew hires meet their buddy on the first day.\n"
    "The IT service desk hands out laptops and accounts during the first week.\n",
}


@pytest.fixture(scope="module")
def handbook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphRoute]:
    root = tmp_path_factory.mktemp("handbook")
    docs = root / "docs"
    docs.mkdir()
    for name, text in HANDBOOK.items():
        (docs / name).write_text(text, encoding="utf-8")
    gr = GraphRoute(store=str(root / "store"), group="handbook")
    assert not gr.index([Path(docs)]).to_json()["failed"]
    yield gr
    gr.close()


def test_route2_local_answers_who_approves_travel_requests_with_a_citation(handbook: GraphRoute) -> None:
    r = handbook.query("Who approves travel requests?", route="route2_local")
    assert not r.negative
    assert "head of the employee's department" in r.answer
    assert r.citations and r.citations[0].document == "Travel policy"
