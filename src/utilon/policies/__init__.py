"""Scheduling policies of both worlds, registered by name.  Importing this package registers
them all: the slot world's and Cura's cloud services (``utilon.policies.cura``)."""

from utilon.policies import cura, edf, fair, fifo, rrh  # noqa: F401  (registration side effect)
from utilon.policies.alsched import policy as _alsched  # noqa: F401
from utilon.policies.base import (
    WORLDS,
    CloudPolicy,
    Policy,
    cloud_policy_class,
    make_cloud_policy,
    make_policy,
    policy_class,
    policy_names,
    policy_parameters,
    register,
    world_of,
)
from utilon.policies.cora import policy as _cora  # noqa: F401
from utilon.policies.ras import policy as _ras  # noqa: F401
from utilon.policies.rds import policy as _rds  # noqa: F401

__all__ = ["WORLDS", "CloudPolicy", "Policy", "cloud_policy_class", "make_cloud_policy",
           "make_policy", "policy_class", "policy_names", "policy_parameters", "register",
           "world_of"]
