"""Scheduling policies of both worlds, registered by name: the slot world's and Cura's cloud
services (``utilon.policies.cura``).  A built-in policy's module is imported when the policy is
first asked for (``policies.base.BUILTINS``), so importing this package is cheap.  Policies of
other packages come in as ``package.module:Class`` references or ``utilon.policies`` entry
points (``utilon.plugins``, docs/plugins.md)."""

from typing import TYPE_CHECKING, Any

from utilon.policies.base import (
    BUILTINS,
    DEFAULT_ALIAS,
    DEFAULT_POLICY,
    WORLDS,
    Policy,
    canonical,
    cloud_policy_class,
    load_builtins,
    make_cloud_policy,
    make_policy,
    origin,
    plugin_policies,
    policy_class,
    policy_names,
    policy_parameters,
    register,
    world_of,
)

if TYPE_CHECKING:
    from utilon.cloud.policy import CloudPolicy

__all__ = ["BUILTINS", "DEFAULT_ALIAS", "DEFAULT_POLICY", "WORLDS", "CloudPolicy", "Policy",
           "canonical", "cloud_policy_class", "load_builtins",
           "make_cloud_policy", "make_policy", "origin", "plugin_policies", "policy_class",
           "policy_names",
           "policy_parameters", "register", "world_of"]


def __getattr__(name: str) -> Any:
    """``CloudPolicy``: imported when first asked for (``policies.base.__getattr__``)."""
    if name == "CloudPolicy":
        from utilon.policies import base

        return base.CloudPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
