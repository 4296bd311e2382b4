"""Reading scenario files, with one-line errors that name the file, the field and the fix."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from utilon.errors import ScenarioError
from utilon.model.cluster import CapacityAction, Cluster
from utilon.readers import pydantic_error
from utilon.scenario.build import Workload, build_cluster, build_workload
from utilon.scenario.spec import ClusterSpec, ScenarioSpec

if TYPE_CHECKING:  # Cura's world loads only for cloud scenarios: a slot scenario is read faster
    from utilon.cloud.scenario import CloudWorkload


def is_cloud(data: Any) -> bool:
    """A parsed scenario file is a cloud scenario when it has a ``cloud:`` section."""
    return isinstance(data, dict) and "cloud" in data


_log = logging.getLogger(__name__)

# libyaml's loader when available: an imported full-day trace is megabytes of YAML.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_scenario(data: Any, source: str = "<scenario>") -> ScenarioSpec:
    """Validate a slot-world scenario already read into Python data (a mapping);
    ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a mapping with cluster: (or cloud:) and "
                            "workload:", where=source, fix="see examples/")
    if is_cloud(data):
        raise ScenarioError("this is a cloud scenario (it has cloud:), and this command needs "
                            "a slot scenario (cluster:)", where=source,
                            fix="cloud scenarios run with simulate, compare, plan, validate "
                                "and report (docs/cloud.md)")
    try:
        return ScenarioSpec.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(exc, data, source) from None


def read_scenario(path: str | Path) -> ScenarioSpec:
    """Read and validate a slot-world scenario file, without building it."""
    p = Path(path)
    return parse_scenario(read_data(p), str(p))


def read_data(p: Path) -> Any:
    """A YAML or JSON file's data; every way it can fail to read is one line naming it."""
    if not p.exists():
        raise ScenarioError("file not found", where=str(p), fix="check the path")
    if p.is_dir():
        raise ScenarioError("is a directory, not a file", where=str(p))
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"cannot read: {e}", where=str(p)) from None
    try:
        data = json.loads(text) if p.suffix == ".json" else load_yaml(text)
    except json.JSONDecodeError as e:
        raise ScenarioError(f"JSON syntax error: {e.msg}",
                            where=f"{p}:{e.lineno}:{e.colno}") from None
    except RecursionError:
        raise ScenarioError("nested too deeply to read", where=str(p),
                            fix="a scenario nests a few levels; check the file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ScenarioError(f"YAML syntax error: {problem}", where=f"{p}{at}") from None
    if _ALIAS.search(text):
        _check_expansion(data, str(p))
    return data


# a YAML alias (``*name``) after a separator: only then can the data be a DAG
_ALIAS = re.compile(r"(?:^|[\s\[{,:-])\*[^\s,\]}]")
MAX_VALUES = 50_000_000
"""Most values a scenario may expand to once YAML aliases are resolved (a billion-laughs
file is a few lines that expand to billions)."""


def _check_expansion(data: Any, where: str) -> None:
    """Refuse data whose aliases expand past ``MAX_VALUES`` (counted once per shared node,
    without expanding anything)."""
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        known = sizes.get(id(node))
        if known is None:
            children = node.values() if isinstance(node, dict) else node
            known = sizes[id(node)] = 1 + sum(size(c) for c in children)
            if known > MAX_VALUES:
                raise ScenarioError(
                    f"YAML aliases expand to more than {MAX_VALUES:,} values", where=where,
                    fix="write the data out instead of aliasing it")
        return known

    try:
        size(data)
    except RecursionError:
        raise ScenarioError("nested too deeply to read", where=where,
                            fix="a scenario nests a few levels; check the file") from None


_JSON_ITEM = re.compile(r"^( *)- (\{.*\})[ \t]*$")
_SENTINEL = "@@utilon-json-run-"


def load_yaml(text: str) -> Any:
    """YAML, with a fast path for long lists of one-line JSON mappings.

    ``utilon trace import`` writes one job per line as JSON flow (JSON is YAML).  A full-day
    trace has tens of thousands of them, which the YAML constructor builds slowly (half a
    minute); ``json.loads`` reads the same lines in well under a second.  Runs of such lines
    are cut out, parsed as JSON, and spliced back where YAML saw a placeholder; a line that is
    not valid JSON is left to YAML, so the result is what YAML alone would give.
    """
    lines = text.split("\n")
    if len(lines) < 1000:
        return yaml.load(text, Loader=_Loader)
    runs: list[list[Any]] = []
    kept: list[str] = []
    current: tuple[str, list[Any]] | None = None
    for line in lines:
        m = _JSON_ITEM.match(line)
        item: Any = None
        if m is not None:
            try:
                item = json.loads(m.group(2))
            except json.JSONDecodeError:
                m = None
        if m is not None and isinstance(item, dict):
            if current is not None and current[0] == m.group(1):
                current[1].append(item)
                continue
            current = (m.group(1), [item])
            runs.append(current[1])
            kept.append(f'{m.group(1)}- "{_SENTINEL}{len(runs) - 1}"')
            continue
        current = None
        kept.append(line)
    data = yaml.load("\n".join(kept), Loader=_Loader)
    return _splice(data, runs) if runs else data


def _splice(node: Any, runs: list[list[Any]]) -> Any:
    if isinstance(node, dict):
        return {k: _splice(v, runs) for k, v in node.items()}
    if isinstance(node, list):
        out: list[Any] = []
        for v in node:
            if isinstance(v, str) and v.startswith(_SENTINEL):
                out.extend(runs[int(v[len(_SENTINEL):])])
            else:
                out.append(_splice(v, runs))
        return out
    return node


def with_capacity_file(spec: ScenarioSpec, path: str | Path) -> ScenarioSpec:
    """The scenario with its capacity replaced by ``path``: a YAML or JSON list of events
    ``{at, action, machines, factor}`` (or a mapping with a ``capacity:`` list) replaces the
    timeline; a cluster (a mapping with ``machines:``, or ``cluster: {machines: ...}`` as
    ``utilon trace import`` writes it) replaces the whole cluster."""
    p = Path(path)
    data = read_data(p)
    if isinstance(data, dict) and isinstance(data.get("cluster"), dict):
        data = data["cluster"]
    if isinstance(data, dict) and "machines" in data:
        try:
            cluster = ClusterSpec.model_validate(data)
        except ValidationError as exc:
            raise pydantic_error(exc, data, str(p)) from None
        return spec.model_copy(update={"cluster": cluster})
    events = data.get("capacity") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ScenarioError("a capacity file must be a list of events (or capacity: [...]), "
                            "or a cluster with machines:", where=str(p),
                            fix="see docs/scenario.md#capacity-timeline")
    try:
        cluster = ClusterSpec.model_validate(
            {**spec.cluster.model_dump(by_alias=True), "capacity": events})
    except ValidationError as exc:
        raise pydantic_error(exc, {"capacity": events}, str(p)) from None
    return spec.model_copy(update={"cluster": cluster})


def load_workload(path: str | Path, *, seed: int | None = None,
                  capacity: str | Path | None = None) -> Workload:
    """Read, validate and build a slot-world scenario file (YAML or JSON; the format is
    ``docs/scenario.md``).  ``seed`` replaces the scenario's own (a generated workload is
    drawn again); ``capacity`` replaces the cluster's capacity timeline, or the whole
    cluster, with a file's (``with_capacity_file``).  A file that is not a valid scenario
    raises ``ScenarioError``, whose one line names the file and the field."""
    spec = read_scenario(path)
    if capacity is not None:
        spec = _with_checked_capacity(spec, Path(path), capacity)
    return _build(spec, seed, Path(path))


def _with_checked_capacity(spec: ScenarioSpec, path: Path, capacity: str | Path) -> ScenarioSpec:
    """``with_capacity_file``, with the events checked against the scenario's machines here, so
    that an unknown machine or a join of a machine already up names the capacity file, not the
    scenario (the scenario's own machines are checked first, and blamed on it)."""
    with _last_defence(path, "docs/scenario.md"):
        before = build_cluster(spec.cluster, f"{path}: ")
    spec = with_capacity_file(spec, capacity)
    with _last_defence(Path(capacity), "docs/scenario.md#capacity-timeline"):
        after = build_cluster(spec.cluster, f"{capacity}: ")
    was, peak, res = _peak_up(before), _peak_up(after), _common_resource(before, after)
    if res and was.get(res, 0.0) > 0 and peak.get(res, 0.0) < SMALL_CAPACITY * was[res]:
        _log.warning("%s: at most %.0f%% of the scenario's %s (%g of %g) is ever up under this "
                     "capacity file, so most jobs may miss; the workload was sized for the "
                     "scenario's cluster (scale the file with `trace import solar --machines`)",
                     capacity, 100 * peak[res] / was[res], res, peak[res], was[res])
    return spec


#: a capacity file that never brings up this share of the scenario's capacity gets a warning
SMALL_CAPACITY = 0.5


def _common_resource(*clusters: Cluster) -> str:
    names = set.intersection(*(set(c.resource_names) for c in clusters))
    return next((r for r in ("slots", "cpu") if r in names), min(names, default=""))


def _peak_up(cl: Cluster) -> dict[str, float]:
    """Per resource, the largest declared capacity up at once over the timeline (scaling
    ignored: it changes speed, not what is there)."""
    caps = {m.id: m.capacity for m in cl.machines}
    up = {m.id for m in cl.machines} - set(cl.initially_down)
    now: dict[str, float] = {}
    for mid in up:
        for r, x in caps[mid].items:
            now[r] = now.get(r, 0.0) + x
    peak = dict(now)
    for ch in sorted(cl.timeline, key=lambda c: c.time):
        sign = (1.0 if ch.action is CapacityAction.JOIN and ch.machine not in up
                else -1.0 if ch.action is CapacityAction.LEAVE and ch.machine in up else 0.0)
        if not sign:
            continue
        (up.add if sign > 0 else up.discard)(ch.machine)
        for r, x in caps[ch.machine].items:
            now[r] = now.get(r, 0.0) + sign * x
            peak[r] = max(peak.get(r, 0.0), now[r])
    return peak


def _build(spec: ScenarioSpec, seed: int | None, path: Path) -> Workload:
    with _last_defence(path, "docs/scenario.md"):
        return build_workload(spec, seed=seed, source=str(path))


@contextmanager
def _last_defence(path: Path, doc: str) -> Iterator[None]:
    """Every value has a limit checked when it is read, but a value that slips past one must
    still end as one line naming the file, never a traceback."""
    try:
        yield
    except (ArithmeticError, ValueError, TypeError, RecursionError, MemoryError) as e:
        raise ScenarioError(f"cannot build the scenario ({type(e).__name__}: {e})",
                            where=str(path), fix=f"check its values against {doc}") from None


def load_scenario(path: str | Path, *, seed: int | None = None,
                  capacity: str | Path | None = None,
                  estimates: str | None = None) -> Workload | CloudWorkload:
    """A scenario of either world: a cloud scenario (a ``cloud:`` section, Cura's world) or a
    slot scenario (``cluster:``), read once and built.  ``estimates`` replaces the scenario's
    ``simulation.estimates`` (``--estimates``)."""
    p = Path(path)
    data = read_data(p)
    if not is_cloud(data):
        spec = parse_scenario(data, str(p))
        if capacity is not None:
            spec = _with_checked_capacity(spec, p, capacity)
        if estimates is not None:
            spec = with_estimates(spec, estimates)
        return _build(spec, seed, p)
    if capacity is not None:
        raise ScenarioError("--capacity replaces a slot cluster's timeline; a cloud scenario "
                            "has servers, not machines", where=str(p),
                            fix="set cloud.servers in the scenario instead")
    if estimates is not None:
        raise ScenarioError("--estimates sets what slot policies know of task durations; a "
                            "cloud scenario's services plan from its profile store",
                            where=str(p), fix="omit --estimates")
    from utilon.cloud.scenario import build_cloud_workload, parse_cloud_scenario

    cspec = parse_cloud_scenario(data, str(p))
    with _last_defence(p, "docs/cloud.md"):
        return build_cloud_workload(cspec, seed=seed, source=str(p))


def with_estimates(spec: ScenarioSpec, estimates: str) -> ScenarioSpec:
    """The scenario with ``simulation.estimates`` replaced (``--estimates``), checked here so
    that a bad value blames the option, not the file."""
    from utilon.sim.estimates import canonical

    try:
        mode = canonical(estimates)
    except ValueError as e:
        raise ScenarioError(str(e), where="--estimates",
                            fix="e.g. --estimates realistic") from None
    simulation = spec.simulation.model_copy(update={"estimates": mode})
    return spec.model_copy(update={"simulation": simulation})


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of slot-world scenario files (``docs/scenario.schema.json``)."""
    schema = ScenarioSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "utilon scenario"
    return schema
