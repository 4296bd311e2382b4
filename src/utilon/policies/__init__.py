"""Scheduling policies of both worlds, registered by name: the slot world's and Cura's cloud
services (``utilon.policies.cura``).  A built-in policy's module is imported when the policy is
first asked for (``policies.base.BUILTINS``), so importing this package is cheap."""

from utilon.policies.base import (
    BUILTINS,
    DEFAULT_ALIAS,
    DEFAULT_POLICY,
    WORLDS,
    CloudPolicy,
    Policy,
    canonical,
    cloud_policy_class,
    load_builtins,
    make_cloud_policy,
    make_policy,
    policy_class,
    policy_names,
    policy_parameters,
    register,
    world_of,
)

__all__ = ["BUILTINS", "DEFAULT_ALIAS", "DEFAULT_POLICY", "WORLDS", "CloudPolicy", "Policy",
           "canonical", "cloud_policy_class", "load_builtins",
           "make_cloud_policy", "make_policy", "policy_class", "policy_names",
           "policy_parameters", "register", "world_of"]
