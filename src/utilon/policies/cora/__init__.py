"""CORA (Huang et al., "Need for Speed: CORA Scheduler for Optimizing Completion-Times in the
Cloud"): lexicographic max-min allocation of job utilities over discrete time slots.

* ``instance``: the slotted problem (capacities, demands, parallelism caps, utility tables).
* ``exact``: the exact solver of the intended objective (progressive filling, with a branch
  and bound where tied utilities leave a real choice — the problem is NP-hard in general).
* ``lp``: the paper's FINAL LP, built and solved with HiGHS as written.
* ``milp``: a HiGHS MILP reference for the intended objective (tests, small instances).
* ``policy``: the ``cora`` and ``cora-lp`` policies and the slotted-time mapping of §III-A.
* ``oneshot``: ``utilon solve cora INSTANCE.json``.
"""
