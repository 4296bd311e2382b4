"""RAS (Polo et al., "Resource-aware Adaptive Scheduling for MapReduce Clusters",
Middleware 2011): job slots on multi-resource TaskTrackers guided by completion-time goals.
One module per component of §3.2: the completion-time estimator (``estimator``), the job
utility (``utility``), the placement algorithm (``placement``), and the ``ras`` policy with
its task scheduler (``policy``).
"""
