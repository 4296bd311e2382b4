"""The league (issue 45): a fixed tuning set and a held-out set of workloads on which a
candidate policy meets stated targets against every other policy, or does not.

``league.yaml`` at the repository's root defines it (``spec``); ``workloads`` turns its
entries into scenario files, ``grid`` runs (workload, policy) pairs in parallel, ``targets``
decides each target from the means over seeds and ``run`` ties them together and writes
``league.json``, ``league.md``, ``league-details.md`` and ``runs.csv``.  See docs/league.md.
"""

from utilon.league.run import Setup, run_league, setup
from utilon.league.spec import SETS, League, read_league

__all__ = ["SETS", "League", "Setup", "read_league", "run_league", "setup"]
