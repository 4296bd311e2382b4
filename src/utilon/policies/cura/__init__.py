"""Cura (Palanisamy, Singh, Liu; IEEE TPDS 2015) and the services it is compared with.

``baselines`` holds the per-job cluster, dedicated cluster and per-job optimization services,
``book`` the reservation book, ``vmaware`` the VM-aware scheduler (§3.1.2, Appendix A) and
``reconfig`` the reconfiguration-based VM pool manager (§3.2) that together with it is the
``cura`` policy (and its ``cura-capacity`` variant).  They implement the cloud world's
interface, ``utilon.cloud.policy.CloudPolicy``, and register in the one registry of
``utilon.policies`` (``policy_names("cloud")``).
"""

from utilon.policies.cura import baselines, reconfig, vmaware

__all__ = ["baselines", "reconfig", "vmaware"]
