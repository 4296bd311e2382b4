"""Scheduling policies, registered by name.  Importing this package registers them all."""

from utilon.policies import edf, fair, fifo  # noqa: F401  (registration side effect)
from utilon.policies.base import (
    Policy,
    make_policy,
    policy_class,
    policy_names,
    policy_parameters,
    register,
)

__all__ = ["Policy", "make_policy", "policy_class", "policy_names", "policy_parameters",
           "register"]
