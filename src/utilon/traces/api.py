"""``import_trace``: a trace file -> a scenario document (the Python face of
``utilon trace import``), and ``write_scenario`` to put it on disk.

A workload importer (swim, alibaba-2017, coflow-fb2010, sls, synth) brings jobs and proposes a
cluster; a cluster importer (alibaba-2017-servers, google-2019-machines, solar) brings machines and
a capacity timeline.  ``with_scenario`` supplies the other half from an existing scenario (its
cluster for a workload import, its workload for a cluster import); without it a cluster import
writes a cluster document that ``--capacity FILE`` accepts in place of a scenario's cluster.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from utilon.limits import MAX_MACHINES
from utilon.scenario.build import build_cluster, build_workload
from utilon.scenario.load import parse_scenario, read_scenario
from utilon.scenario.spec import ClusterSpec, ScenarioSpec
from utilon.traces.base import (
    DEFAULT_LOAD,
    ClassRule,
    Common,
    Importer,
    SkipLog,
    TraceError,
    TracePart,
    Window,
    sha256_of,
)
from utilon.traces.kinds import importer


@dataclass
class ImportResult:
    kind: str
    path: Path
    document: dict[str, Any]
    """A whole scenario, or ``{"cluster": ...}`` for a cluster import without a workload."""
    log: SkipLog
    part: TracePart
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def is_scenario(self) -> bool:
        return "workload" in self.document

    def summary_lines(self) -> list[str]:
        lines = self.log.lines()
        lines += [f"{k}: {v}" for k, v in self.stats.items()]
        return lines


def import_trace(
    kind: str,
    path: str | Path,
    *,
    window: Window | None = None,
    seed: int = 0,
    machines: int | None = None,
    load: float | None = None,
    classes: ClassRule | None = None,
    options: dict[str, Any] | None = None,
    with_scenario: str | Path | ScenarioSpec | None = None,
    name: str | None = None,
    max_bad: float = 0.01,
) -> ImportResult:
    """Read ``path`` as a ``kind`` trace and build a scenario document (validated).

    ``machines`` fixes the cluster size; otherwise ``load`` (default: 0.7 for importers whose
    cluster is an assumption) sizes the proposed cluster so that the declared work divided by
    (capacity x submit span) equals it -- the trace is then read a second time.
    """
    cls = importer(kind)
    opts = cls.parse_options(dict(options or {}))
    if not (0 <= max_bad <= 1):
        raise TraceError("--max-bad must be a fraction in [0, 1]", where="command line")
    if machines is not None and machines < 1:
        raise TraceError("--machines must be >= 1", where="command line")
    if load is not None and not (0 < load <= 10):
        raise TraceError("--load must be in (0, 10]", where="--load",
                         fix="0.7 means the cluster is busy 70% of the time on average")
    p = Path(path)
    common = Common(window or Window(), seed, machines, classes or ClassRule(), max_bad)
    log = SkipLog(p, max_bad)
    part = _read(cls, p, common, opts, log)
    base = _base_spec(with_scenario)
    sizing = ""
    target = load if load is not None else (DEFAULT_LOAD if cls.sized_by_load else None)
    if part.jobs is not None and machines is None and base is None and target is not None:
        need = _machines_for_load(part, target, p)
        if need is not None:
            common = replace(common, machines=need)
            log = SkipLog(p, max_bad)
            part = _read(cls, p, common, opts, log)
            sizing = f"cluster sized to an offered load of {target:g}: {need} machines"

    window = common.window
    if window.duration is None and part.stats.get("window_s") is not None:
        # the importer applied its own default duration (google: one day): say so
        window = replace(window, duration=float(part.stats["window_s"]))
    meta: dict[str, Any] = {
        "trace": {
            "kind": kind,
            "file": p.name,
            "sha256": sha256_of(p),
            "bytes": p.stat().st_size,
            "window": window.describe(),
            "seed": seed,
            "options": opts.model_dump(mode="json"),
            "rows": log.as_dict(),
        },
        "real": part.provenance.real,
        "assumed": part.provenance.assumed,
    }
    if part.jobs is not None:
        meta["trace"]["classes"] = common.classes.model_dump(mode="json")
    if sizing:
        meta["assumed"] = [*meta["assumed"], sizing]
    stats = dict(part.stats)
    doc: dict[str, Any] = {}
    stem = name or f"{kind}-{p.stem.split('.')[0]}"
    if part.jobs is not None:
        if base is not None:
            cluster = base.cluster.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            meta["cluster_from"] = str(with_scenario)
        else:
            assert part.cluster is not None, f"{kind} proposes no cluster"
            cluster = part.cluster
        doc = {"name": stem, "description": f"{kind} trace {p.name}, {window.describe()}",
               "seed": seed, "metadata": meta, "cluster": cluster,
               "workload": {"jobs": part.jobs}}
        stats.update(_load_stats(part.jobs, cluster))
    else:
        assert part.cluster is not None
        if base is not None:
            doc = base.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            doc["cluster"] = part.cluster
            doc["name"] = name or f"{base.name}-{kind}"
            meta["workload_from"] = str(with_scenario)
            if base.metadata:
                meta["workload_metadata"] = base.metadata
            doc["metadata"] = meta
        else:
            doc = {"metadata": meta, "cluster": part.cluster}
    text = json.dumps(doc, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TraceError("a name or id is not valid Unicode (a lone surrogate escape)",
                         where=str(p), fix="fix the \\uD800-\\uDFFF escape in the trace"
                         ) from None
    # Validate the way `utilon simulate` will read it, so a bad import fails here.
    if "workload" in doc:
        where = f"{p} (imported as {kind})"
        build_workload(parse_scenario(json.loads(text), where), source=where)
    else:
        _check_cluster(doc["cluster"], f"{p} (imported as {kind})")
    return ImportResult(kind, p, doc, log, part, stats)


def _read(cls: type[Importer], p: Path, common: Common, opts: Any, log: SkipLog) -> TracePart:
    """One pass of an importer over ``p``.  Importers reject malformed lines one by one; a
    value that slips past their checks still ends as one line naming the file."""
    try:
        return cls().read(p, common, opts, log)
    except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError) as e:
        raise TraceError(f"cannot import this trace ({type(e).__name__}: {e})", where=str(p),
                         fix="check the file is of this kind (see `utilon trace kinds`)"
                         ) from None


def _machines_for_load(part: TracePart, load: float, path: Path) -> int | None:
    """Machines of the (single-group) proposed cluster for the given offered load."""
    groups = (part.cluster or {}).get("machines", [])
    if len(groups) != 1 or not part.jobs:
        return None
    stats = _load_stats(part.jobs, {"machines": [{**groups[0], "count": 1}]})
    per_machine = stats.get("offered_load")  # load if the cluster were one machine
    if not per_machine:
        return None
    need = max(per_machine.values()) / load
    if not need <= MAX_MACHINES:  # also NaN and infinity
        raise TraceError(
            f"an offered load of {load:g} needs {need:.3g} machines, more than "
            f"{MAX_MACHINES:,}", where=str(path),
            fix="give --machines, a higher --load, or import less of the trace "
                "(--start/--duration/--max-jobs)")
    return max(1, math.ceil(need))


def _check_cluster(cluster: dict[str, Any], where: str) -> None:
    try:
        spec = ClusterSpec.model_validate(json.loads(json.dumps(cluster)))
    except ValidationError as exc:
        raise TraceError(f"importer produced an invalid cluster: {exc.errors()[0]['msg']}",
                         where=where) from None
    build_cluster(spec, f"{where}: ")


def _base_spec(src: str | Path | ScenarioSpec | None) -> ScenarioSpec | None:
    if src is None or isinstance(src, ScenarioSpec):
        return src
    return read_scenario(src)


def _load_stats(jobs: list[dict[str, Any]], cluster: dict[str, Any]) -> dict[str, Any]:
    """Jobs, tasks and offered load: declared work per resource over (capacity x span)."""
    tasks = 0
    work: dict[str, float] = {}
    for j in jobs:
        for st in j["stages"]:
            durs = st.get("durations")
            n = len(durs) if durs else int(st["tasks"])
            seconds = sum(durs) if durs else float(st["duration"]) * n
            tasks += n
            for r, x in (st.get("demand") or {"slots": 1.0}).items():
                work[r] = work.get(r, 0.0) + seconds * float(x)
    capacity: dict[str, float] = {}
    for g in cluster.get("machines", []):
        for r, x in g.get("capacity", {}).items():
            capacity[r] = capacity.get(r, 0.0) + float(x) * int(g.get("count", 1))
    span = max((float(j["submit"]) for j in jobs), default=0.0)
    out: dict[str, Any] = {"jobs": len(jobs), "tasks": tasks, "submit_span_s": span}
    if span > 0:
        out["offered_load"] = {r: round(w / (capacity[r] * span), 3)
                               for r, w in sorted(work.items()) if capacity.get(r)}
    return out


# -- writing ---------------------------------------------------------------------------------
_EXP = re.compile(r"(?<=[:\[,])(-?\d+)(e[-+]\d+)")


# a JSON surrogate pair (a character outside the BMP), not preceded by an escaped backslash
_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def _astral(m: re.Match[str]) -> str:
    hi, lo = int(m.group(2), 16), int(m.group(3), 16)
    return f"{m.group(1)}\\U{0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00):08x}"


def _flow(obj: Any) -> str:
    """One YAML flow line (JSON with floats YAML 1.1 reads as floats: ``1.0e-05``, and
    characters outside the BMP as YAML's ``\\U0001f600``: YAML refuses JSON's surrogate pairs)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return _PAIR.sub(_astral, _EXP.sub(r"\1.0\2", text))


def write_scenario(result: ImportResult, out: str | Path, command: str = "") -> Path:
    """Write the document as YAML: settings in block style, one job (and one capacity event)
    per line so that a full-day trace stays small, diffable and fast to read."""
    target = Path(out)
    doc = dict(result.document)
    jobs = doc.get("workload", {}).get("jobs")
    cluster = dict(doc.get("cluster", {}))
    events = cluster.pop("capacity", None)
    machines = cluster.pop("machines", None)
    lines = [f"# Imported from a {result.kind} trace ({result.path.name}) by utilon.",
             "# What is real and what is assumed: see metadata below (also copied into every",
             "# run's provenance.json)."]
    if command:
        lines.append(f"# command: {command}")
    head = {k: v for k, v in doc.items() if k not in ("cluster", "workload", "metadata")}
    if head:
        lines.append(yaml.safe_dump(head, sort_keys=False, width=100).rstrip())
    lines.append("metadata:")
    lines.append(_indent(yaml.safe_dump(doc["metadata"], sort_keys=False, width=100), 2))
    if machines is not None or events is not None:
        lines.append("cluster:")
        for k, v in cluster.items():
            lines.append(f"  {k}: {_flow(v)}")
        if machines is not None:
            lines.append("  machines:")
            lines.extend(f"    - {_flow(m)}" for m in machines)
        if events:
            lines.append("  capacity:")
            lines.extend(f"    - {_flow(e)}" for e in events)
    if "workload" in doc:
        rest = {k: v for k, v in doc["workload"].items() if k != "jobs"}
        lines.append("workload:")
        for k, v in rest.items():
            lines.append(f"  {k}: {_flow(v)}")
        if jobs is not None:
            lines.append("  jobs:")
            lines.extend(f"    - {_flow(j)}" for j in jobs)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + ln if ln else ln for ln in text.rstrip("\n").splitlines())
