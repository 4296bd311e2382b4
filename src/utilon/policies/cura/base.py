"""Where Cura's services find the cloud world's policy interface and the one registry.

The interface is ``utilon.cloud.policy.CloudPolicy`` (next to the cloud simulator, as the slot
world's is next to its core); the registry is ``utilon.policies.base``, shared by both worlds.
"""

from utilon.cloud.policy import CloudPolicy
from utilon.policies.base import (
    cloud_policy_class,
    make_cloud_policy,
    policy_names,
    register,
)


def cloud_policy_names() -> list[str]:
    """The registered cloud services, sorted."""
    return policy_names("cloud")


__all__ = ["CloudPolicy", "cloud_policy_class", "cloud_policy_names", "make_cloud_policy",
           "register"]
