"""RDS (Cheng et al., "Deadline-Aware MapReduce Job Scheduling with Dynamic Resource
Availability", IEEE TPDS 2019).

* ``predict``   — capacity predictors of §4 (ARIMA, green power, last value, oracle), NRMSE;
* ``capacity``  — effective capacity (slots × speed) and its replay from a cluster timeline;
* ``progress``  — the Takagi–Sugeno fuzzy NARX progress model with RLS adaptation (§3.2);
* ``optimizer`` — the receding-horizon QP of Eq. 3 (Clarabel; HiGHS for comparison);
* ``slots``     — job management and Algorithm 1, dynamic slots (§4.3);
* ``order``     — the WMDD order of the ``tardiness`` variant (issue 22, not in the paper);
* ``profile``   — profiled solo runs that train the progress models;
* ``policy``    — the ``rds`` policy that ties them together.
"""
