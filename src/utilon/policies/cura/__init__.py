"""Cura (Palanisamy, Singh, Liu; IEEE TPDS 2015) and the services it is compared with.

``base`` is the cloud world's policy interface, ``baselines`` the per-job cluster, dedicated
cluster and per-job optimization services, ``book`` the reservation book, ``vmaware`` the
VM-aware scheduler (§3.1.2, Appendix A) and ``reconfig`` the reconfiguration-based VM pool
manager (§3.2) that together with it is the ``cura`` policy.
"""

from utilon.policies.cura import baselines, reconfig, vmaware
from utilon.policies.cura.base import CloudPolicy, cloud_policy_names, make_cloud_policy

__all__ = ["CloudPolicy", "baselines", "cloud_policy_names", "make_cloud_policy", "reconfig",
           "vmaware"]
