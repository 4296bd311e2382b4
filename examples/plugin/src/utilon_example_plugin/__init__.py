"""An example utilon plugin (docs/plugins.md).

* ``policy.ShortestFirst`` (``shortest-first``): jobs with the least expected work left first;
* ``trace.SimpleCsv`` (``simple-csv``): a CSV of jobs (id, submit, tasks, seconds, deadline)
  into a scenario;
* ``jobs.SumSquares`` (``sum-squares``): a real job for ``utilon run`` and the service, whose
  maps add up squares and whose reduce checks the total against the closed form.

Nothing here is registered by importing it: the entry points in ``pyproject.toml`` tell
utilon where each one is, and utilon imports it when it is first asked for.
"""
