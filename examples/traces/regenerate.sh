#!/bin/sh
# Rebuild the scenarios in this folder from the real traces in ../shared/data
# (`make trace-examples`).  Every file records its source, options and assumptions in its
# metadata; importing is deterministic, so re-running gives the same bytes.
set -eu
cd "$(dirname "$0")/../.."
U=${UTILON:-.venv/bin/utilon}
D=${DATA:-../shared/data}
T=examples/traces

# SWIM Facebook: one hour of each day (cluster sized for an offered load of 0.7)
$U trace import swim $D/swim_facebook/FB-2009_samples_24_times_1hr_0.tsv --duration 1h \
  --name fb2009-1h --out $T/swim-fb2009-1h.yaml
$U trace import swim $D/swim_facebook/FB-2010_samples_24_times_1hr_0.tsv --duration 1h \
  --name fb2010-1h --out $T/swim-fb2010-1h.yaml
# ... the same hour with the RAS paper's Table 2 cpu/io/mem profiles (benchmarks/ras_swim.py)
$U trace import swim $D/swim_facebook/FB-2010_samples_24_times_1hr_0.tsv --duration 1h \
  --set profiles=ras-table2 --name fb2010-1h-ras --out $T/swim-fb2010-1h-ras.yaml
# the coflow benchmark's hour of FB-2010 (map/reduce fan-out and shuffle volumes)
$U trace import coflow-fb2010 $D/coflow_fb2010/FB2010-1Hr-150-0.txt \
  --name coflow-fb2010 --out $T/coflow-fb2010.yaml
# Alibaba 2017: one hour of batch jobs, and the machines' soft errors over the trace
$U trace import alibaba-2017 $D/alibaba_v2017/batch_task.csv --start 6h --duration 1h \
  --name alibaba-1h --out $T/alibaba-1h.yaml
# ... and the first 150 jobs of that hour on 400 Alibaba machines (all 7 with soft errors kept)
$U trace import alibaba-2017 $D/alibaba_v2017/batch_task.csv --start 6h --max-jobs 150 \
  --machines 400 --name alibaba-150 --out $T/alibaba-150.tmp.yaml
$U trace import alibaba-2017-servers $D/alibaba_v2017/server_event.csv --machines 400 \
  --with $T/alibaba-150.tmp.yaml --name alibaba-softerrors --out $T/alibaba-softerrors.yaml
rm $T/alibaba-150.tmp.yaml
# Google 2019 cell a: one day of machine events (200 sampled machines), as a cluster file
$U trace import google-2019-machines \
  $D/google_2019_machine_events/machine_events-000000000000.json.gz \
  --out $T/google-2019-day.cluster.yaml
# NREL solar: a half-green cluster following one July week of PV output (scale-out),
# replaying the FB-2009 hour against it
$U trace import solar $D/nrel_pvdaq_serf_east/serf_east_15min_ac_power.csv --duration 7d \
  --out $T/solar-week.cluster.yaml
$U trace import solar $D/nrel_pvdaq_serf_east/serf_east_15min_ac_power.csv --duration 1d \
  --start 6h --machines 40 --with $T/swim-fb2009-1h.yaml --name fb2009-1h-solar \
  --out $T/swim-fb2009-1h-solar.yaml
# Hadoop SLS and SYNTH inputs (small files written for utilon's tests)
$U trace import sls tests/data/traces/sls-2jobs.json --name sls-2jobs --out $T/sls-2jobs.yaml
$U trace import synth tests/data/traces/synth-small.json --name synth-small \
  --out $T/synth-small.yaml
