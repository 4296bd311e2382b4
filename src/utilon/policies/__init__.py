"""Scheduling policies, registered by name.  Importing this package registers them all."""

from utilon.policies import edf, fair, fifo, rrh  # noqa: F401  (registration side effect)
from utilon.policies.alsched import policy as _alsched  # noqa: F401
from utilon.policies.base import (
    Policy,
    make_policy,
    policy_class,
    policy_names,
    policy_parameters,
    register,
)
from utilon.policies.cora import policy as _cora  # noqa: F401
from utilon.policies.ras import policy as _ras  # noqa: F401
from utilon.policies.rds import policy as _rds  # noqa: F401

__all__ = ["Policy", "make_policy", "policy_class", "policy_names", "policy_parameters",
           "register"]
