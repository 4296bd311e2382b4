"""What a scenario of either world sets for one of its policies.

A module of its own, with no imports, so that ``utilon validate`` can check a scenario's
policies without loading the runner (the simulator, the live backends: issue 47's startup
goal); ``utilon.runner`` uses the same function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class _PolicyChoice(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def params(self) -> Mapping[str, Any]: ...


class ConfiguresPolicies(Protocol):
    """A scenario of either world: ``policies:`` (parameters per name) and ``policy:``."""

    @property
    def policies(self) -> Mapping[str, Mapping[str, Any]]: ...

    @property
    def policy(self) -> _PolicyChoice | None: ...


def scenario_params(spec: ConfiguresPolicies, name: str) -> dict[str, Any]:
    """What a scenario of either world sets for policy ``name``: ``policies.<name>``, then
    ``policy.params`` when ``policy.name`` is it."""
    params = dict(spec.policies.get(name, {}))
    if spec.policy is not None and spec.policy.name == name:
        params.update(spec.policy.params)
    return params
