"""RAS (Polo et al., "Resource-aware Adaptive Scheduling for MapReduce Clusters",
Middleware 2011): job slots on multi-resource TaskTrackers guided by completion-time goals.
This package grows with issue 8; so far the performance model of §3.3 (``utility``), the
completion-time estimator of §3.2 (``estimator``) and the placement algorithm of §3.4
(``placement``).  Not yet: the task scheduler of §3.5, the ``ras`` policy, the reproduction.
"""
