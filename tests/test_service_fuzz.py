"""Property-based fuzzing of the service's API from its own OpenAPI schema (schemathesis):
whatever a client sends -- any body, any query, any path, with a tenant's token or without --
the answer is never a server error (5xx)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from fuzzing import FUZZ_EXAMPLES
from utilon.live import LocalBackend
from utilon.policies import make_policy
from utilon.scenario import build_cluster, parse_scenario
from utilon.service.api import create_app
from utilon.service.engine import ServiceEngine
from utilon.service.store import Store
from utilon.service.tenants import TenantBook, create_token

pytestmark = pytest.mark.live
CLUSTER = {"machines": [{"id": "m", "count": 2, "capacity": {"slots": 1, "mem": 4}}]}
STATE: dict[str, Any] = {}


def _engine(d: Path) -> tuple[ServiceEngine, TenantBook]:
    STATE["token"] = create_token(d / "t.yaml", "fuzzer")
    book = TenantBook.load(d / "t.yaml")
    spec = parse_scenario({"name": "t", "cluster": CLUSTER, "workload": {}})
    engine = ServiceEngine(Store(str(d / "u.db")), spec, build_cluster(spec.cluster),
                           make_policy("fair"), LocalBackend(), d / "state",
                           weights=book.weight)
    return engine, book


def test_no_request_makes_a_server_error(tmp_path: Path) -> None:
    engine, book = _engine(tmp_path)
    engine.start()
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json",
                                                create_app(engine, book, manage=False))
        operations = [r.ok() for r in schema.get_all_operations()]
        assert len(operations) >= 7  # health, submit, list, get, cancel, cluster, policy
        for op in operations:

            @settings(max_examples=FUZZ_EXAMPLES // 3, deadline=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy())
            def one(case: Any) -> None:
                for headers in ({"Authorization": f"Bearer {STATE['token']}"}, {}):
                    response = case.call(headers=headers)
                    assert response.status_code < 500, (case.method, case.path,
                                                        response.text)

            one()
    finally:
        engine.stop()
    assert not engine.error, engine.error
