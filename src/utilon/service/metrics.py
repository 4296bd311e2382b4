"""``/metrics`` in Prometheus' text format (prometheus-client), read from the store and the
engine at scrape time, plus a histogram of decision latency fed by the engine's loop.

* ``utilon_jobs{tenant,state}``: jobs per tenant and state;
* ``utilon_deadline_misses_total{tenant}``: finished jobs that missed their goal;
* ``utilon_utility_total{tenant}``: utility the finished jobs earned;
* ``utilon_queue_length``: jobs accepted and not yet running;
* ``utilon_allocation_slots{tenant}`` and ``utilon_capacity_slots``: the slot resource held
  per tenant, and the up capacity, at the last sample;
* ``utilon_decision_latency_seconds``: the policy's decision time (histogram);
* ``utilon_up``: 1 while the engine runs;
* ``utilon_active``: 1 on the active server, 0 on a standby (which shows only these two: the
  store's counts are the active server's to report, so that a sum over both is right).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from utilon.service.engine import ServiceEngine

BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
           1.0, 2.5)


class _State(Collector):
    def __init__(self, engine: ServiceEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Any]:
        active = self.engine.active
        yield GaugeMetricFamily("utilon_active", "1 on the active server, 0 on a standby",
                                value=1.0 if active else 0.0)
        if not active:
            yield GaugeMetricFamily("utilon_up", "1 while the engine runs", value=0.0)
            return
        jobs = GaugeMetricFamily("utilon_jobs", "jobs per tenant and state",
                                 labels=["tenant", "state"])
        misses = CounterMetricFamily("utilon_deadline_misses", "finished jobs that missed "
                                     "their goal", labels=["tenant"])
        utility = CounterMetricFamily("utilon_utility", "utility the finished jobs earned",
                                      labels=["tenant"])
        queued = 0
        per_tenant: dict[str, tuple[int, float]] = {}
        for tenant, state, n, missed, util in self.engine.store.tally():
            jobs.add_metric([tenant, state], n)
            if state == "queued":
                queued += n
            if state == "finished":
                per_tenant[tenant] = (missed, util)
        for tenant, (missed, util) in sorted(per_tenant.items()):
            misses.add_metric([tenant], missed)
            utility.add_metric([tenant], util)
        yield jobs
        yield misses
        yield utility
        yield GaugeMetricFamily("utilon_queue_length", "jobs accepted and not yet running",
                                value=queued)
        alloc = GaugeMetricFamily("utilon_allocation_slots", "slot resource held per tenant",
                                  labels=["tenant"])
        samples = self.engine.stats.samples
        last = samples[-1] if samples else None
        if last is not None:
            for tenant, held in sorted(last.tenants.items()):
                alloc.add_metric([tenant], held)
        yield alloc
        yield GaugeMetricFamily("utilon_capacity_slots", "up capacity of the slot resource",
                                value=last.capacity if last is not None else 0.0)
        yield GaugeMetricFamily("utilon_up", "1 while the engine runs",
                                value=1.0 if self.engine.running else 0.0)


class Metrics:
    """One registry per service (tests run several in one process)."""

    def __init__(self, engine: ServiceEngine) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_State(engine))
        self.latency = Histogram("utilon_decision_latency_seconds", "the policy's decision "
                                 "time", buckets=BUCKETS, registry=self.registry)
        engine.stats.on_decide.append(lambda ms: self.latency.observe(ms / 1000.0))

    def render(self) -> bytes:
        return generate_latest(self.registry)


_TENANT = re.compile(rb'tenant="((?:[^"\\]|\\.)*)"')


def own_series(text: bytes, tenant: str) -> bytes:
    """The exposition ``text`` without the samples labelled with another tenant: what a
    tenant's token may read of ``/metrics`` (issue 46: every tenant's names and counts were
    public)."""
    mine = tenant.replace("\\", "\\\\").replace('"', '\\"').encode("utf-8")
    keep = []
    for line in text.splitlines(keepends=True):
        m = None if line.startswith(b"#") else _TENANT.search(line)
        if m is None or m.group(1) == mine:
            keep.append(line)
    return b"".join(keep)
