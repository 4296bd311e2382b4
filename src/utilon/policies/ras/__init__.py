"""RAS (Polo et al., "Resource-aware Adaptive Scheduling for MapReduce Clusters",
Middleware 2011): job slots on multi-resource TaskTrackers guided by completion-time goals.
This package grows with issue 8; so far the performance model of §3.3 (``utility``) and the
completion-time estimator of §3.2 (``estimator``).
"""
