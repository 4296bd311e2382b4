"""Running a league set: every competitor and the candidate on every workload of the set, at
every seed and estimate mode, in one parallel grid; then the targets, and the files.

Outputs, under ``<out>/<set>/``: ``league.json`` (everything: per workload and mode, each
competitor's per-seed values, means and 95% intervals, stopped runs, exclusions, and the
targets), ``league.md`` (the targets table, for the README), ``league-details.md`` (each
competitor's means per workload) and ``runs.csv`` (one row per run).  Generated workloads
are kept in ``<out>/workloads/``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utilon.errors import ScenarioError
from utilon.league.grid import GridRun, WorkloadRef, run_grid
from utilon.league.spec import Competitor, League, Workload, read_league
from utilon.league.targets import METRICS, TARGETS, Cell, Target, cell_of, evaluate
from utilon.league.workloads import Where, first_seed, generate, problems, target
from utilon.parallel import run_all

Progress = Callable[[str, int, int], None]
"""``(what, done, total)``: what the league is doing and how far it got."""


@dataclass(frozen=True)
class Setup:
    """A league set ready to run: the workloads with their seeds, the estimate modes, the
    competitors and the candidate (last in ``players``)."""

    league: League
    set: str
    where: Where
    workloads: tuple[Workload, ...]
    seeds: dict[str, tuple[int, ...]]
    modes: tuple[str, ...]
    competitors: tuple[Competitor, ...]
    candidate: Competitor
    max_jobs: int | None = None

    @property
    def players(self) -> tuple[Competitor, ...]:
        return (*self.competitors, self.candidate)

    def wall_limit(self, w: Workload) -> float | None:
        return w.wall_limit if w.wall_limit is not None else self.league.wall_limit

    def cpu_limit(self, w: Workload) -> float | None:
        return w.cpu_limit if w.cpu_limit is not None else self.league.cpu_limit


def setup(path: str | Path, set_name: str, *, seeds: int | None = None,
          estimates: Sequence[str] | None = None, candidate: str | None = None,
          out: Path = Path("runs/league"), data: Path | None = None,
          only: Sequence[str] | None = None, max_jobs: int | None = None) -> Setup:
    """Read the league file and check everything a run needs before any run starts: the set,
    the policies and their parameters, the estimate modes, the files of every workload."""
    from utilon.policies import canonical, make_policy, policy_class
    from utilon.sim.estimates import canonical as estimate_mode

    league, base = read_league(path)
    if set_name not in league.sets:
        raise ScenarioError(f"the league has no set {set_name!r}; it has "
                            f"{', '.join(league.sets) or 'none'}", where=f"{path}: sets",
                            fix="use --set tuning or --set held-out")
    workloads = league.sets[set_name]
    if only:
        unknown = sorted(set(only) - {w.name for w in workloads})
        if unknown:
            raise ScenarioError(f"no workload {', '.join(unknown)} in the {set_name} set",
                                where="--only",
                                fix="valid: " + ", ".join(w.name for w in workloads))
        workloads = tuple(w for w in workloads if w.name in only)
    competitors = league.competitor_list()
    for c in competitors:
        make_policy(c.policy, c.params, where=f"{path}: competitors.{c.name}")
    name = candidate or league.candidate
    cand = next((c for c in competitors if c.name == name), None)
    if cand is None:
        policy_class(name)  # an unknown candidate lists the registered policies
        cand = Competitor(name=name, policy=name)

    def is_candidate(c: Competitor) -> bool:  # a competitor is never its own reference
        return c.name == cand.name or (canonical(c.policy) == canonical(cand.policy)
                                       and c.params == cand.params)

    competitors = [c for c in competitors if not is_candidate(c)]
    names = {c.name for c in competitors}
    for w in workloads:
        for k in w.exclude:
            if k not in names and k != cand.name:
                raise ScenarioError(f"{w.name} excludes {k!r}, which is not a competitor",
                                    where=f"{path}: sets.{set_name}.{w.name}.exclude")
        if cand.name in w.exclude:
            raise ScenarioError(f"{w.name} excludes the candidate {cand.name!r}",
                                where=f"{path}: sets.{set_name}.{w.name}.exclude",
                                fix="the candidate runs on every workload")
    modes = tuple(estimates or league.estimates)
    for m in modes:
        try:
            estimate_mode(m)
        except ValueError as e:
            raise ScenarioError(str(e), where="--estimates",
                                fix="e.g. --estimates realistic,exact") from None
    where = Where(base, (data or base / league.data).resolve(), out / "workloads")
    missing = [p for w in workloads for p in problems(w, where)]
    if missing:
        raise ScenarioError("; ".join(missing), where=str(path),
                            fix="check the paths (trace files are under data:, "
                                f"{where.data}), or pass --data DIR")
    n = seeds or league.seeds
    seed_map = {w.name: tuple(first_seed(w, where) + i for i in range(n)) for w in workloads}
    return Setup(league, set_name, where, tuple(workloads), seed_map, modes,
                 tuple(competitors), cand, max_jobs)


def prepare(s: Setup, *, jobs: int | None = None, progress: Progress | None = None
            ) -> dict[tuple[str, int], Path]:
    """Every workload's scenario file at every seed, generating (in parallel) those that are
    not in the cache yet."""
    todo = [(w, seed) for w in s.workloads for seed in s.seeds[w.name]]
    files = {(w.name, seed): target(w, seed, s.where) for w, seed in todo}
    missing = [(w, seed) for w, seed in todo if not files[(w.name, seed)].is_file()]
    if missing:
        done: set[int] = set()

        def tick(i: int, d: int, total: int) -> None:
            if d >= total:
                done.add(i)
            if progress is not None:
                progress("generating workloads", len(done), len(missing))

        run_all(_generate, s.where, missing, jobs=jobs, on_progress=tick)
    return files


def _generate(where: Where, item: tuple[Workload, int],
              progress: Callable[[int, int], None] | None) -> Path:
    return generate(item[0], item[1], where)


@dataclass(frozen=True)
class Key:
    workload: str
    mode: str
    seed: int
    player: str


def grid(s: Setup, files: dict[tuple[str, int], Path]) -> tuple[list[Key], list[GridRun]]:
    """Every run of the set, a workload's together (so a worker loads each workload once)."""
    keys, runs = [], []
    for w in s.workloads:
        for mode in s.modes:
            for seed in s.seeds[w.name]:
                ref = WorkloadRef(str(files[(w.name, seed)]), seed, mode, max_jobs=s.max_jobs)
                for p in s.players:
                    if p.name in w.exclude:
                        continue
                    keys.append(Key(w.name, mode, seed, p.name))
                    runs.append(GridRun(ref, p.policy, dict(p.params),
                                        wall_limit=s.wall_limit(w),
                                        cpu_limit=s.cpu_limit(w)))
    return keys, runs


def run_league(s: Setup, *, out: Path, jobs: int | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Run the set and write its files under ``out/<set>/``; returns ``league.json``'s
    document."""
    t0 = time.monotonic()
    files = prepare(s, jobs=jobs, progress=progress)
    keys, runs = grid(s, files)
    done: set[int] = set()

    def tick(i: int, d: int, total: int) -> None:
        if d >= total:
            done.add(i)
        if progress is not None:
            k = keys[i]
            progress(f"{k.workload} ({k.mode})", len(done), len(runs))

    if progress is not None:
        progress("runs", 0, len(runs))
    summaries = run_grid(runs, jobs=jobs, on_progress=tick)
    results = dict(zip(keys, summaries, strict=True))
    doc = document(s, results, time.monotonic() - t0)
    write(doc, results, out / s.set)
    return doc


def document(s: Setup, results: dict[Key, dict[str, Any]], wall: float) -> dict[str, Any]:
    """``league.json``: the set's setup, per workload and mode every player's cell and the
    candidate's targets, and how long it took."""
    from utilon.policies import canonical

    workloads = []
    held = total = judged_held = judged_total = 0
    for w in s.workloads:
        seeds = s.seeds[w.name]
        modes: dict[str, Any] = {}
        run_cpu: dict[str, float] = {}
        for mode in s.modes:
            cells = {}
            for p in s.players:
                got = [results.get(Key(w.name, mode, seed, p.name)) for seed in seeds]
                cells[p.name] = cell_of(p.name, got, w.exclude.get(p.name))
                for g in got:
                    if g is not None:
                        t = g.get("timing", {})
                        run_cpu[p.name] = (run_cpu.get(p.name, 0.0)
                                           + float(t.get("cpu_s", t.get("wall_s", 0.0))))
            others = [c for name, c in cells.items() if name != s.candidate.name]
            targets = evaluate(cells[s.candidate.name], others, s.league.targets)
            for t in targets.values():
                if t.holds is None:
                    continue
                total += 1
                held += bool(t.holds)
                if mode == s.league.judged:
                    judged_total += 1
                    judged_held += bool(t.holds)
            modes[mode] = {"players": {n: _cell_json(c) for n, c in cells.items()},
                           "targets": {n: t.as_dict() for n, t in targets.items()}}
        workloads.append({
            "name": w.name, "source": _source(w), "note": w.note, "seeds": list(seeds),
            "wall_limit": s.wall_limit(w), "cpu_limit": s.cpu_limit(w),
            "excluded": dict(w.exclude), "modes": modes,
            # CPU seconds per player over every seed and mode, slowest first
            "cpu_s": {n: round(x, 2) for n, x in sorted(run_cpu.items(), key=lambda kv: -kv[1])},
            "cpu_s_per_seed_and_mode": round(sum(run_cpu.values())
                                             / max(1, len(seeds) * len(s.modes)), 2)})
    return {
        "set": s.set,
        "candidate": s.candidate.name,
        "candidate_policy": canonical(s.candidate.policy),
        "seeds": len(next(iter(s.seeds.values()), ())),
        "estimates": list(s.modes),
        "judged": s.league.judged,
        "max_jobs": s.max_jobs,
        "competitors": [dataclasses.asdict(_plain(c)) for c in s.competitors],
        "targets": s.league.targets.model_dump(mode="json"),
        "workloads": workloads,
        "held": {"all": [held, total], "judged": [judged_held, judged_total]},
        "wall_s": round(wall, 1),
    }


@dataclass(frozen=True)
class _Player:
    name: str
    policy: str
    params: dict[str, Any]


def _plain(c: Competitor) -> _Player:
    return _Player(c.name, c.policy, dict(c.params))


def _source(w: Workload) -> dict[str, Any]:
    if w.scenario is not None:
        return {"scenario": w.scenario}
    if w.trace is not None:
        return {"trace": w.trace.model_dump(mode="json", exclude_defaults=True)}
    assert w.repro is not None
    return {"repro": w.repro.model_dump(mode="json", exclude_defaults=True)}


def _cell_json(c: Cell) -> dict[str, Any]:
    if c.excluded is not None:
        return {"excluded": c.excluded}
    out: dict[str, Any] = {"stopped": c.stopped}
    for m in METRICS:
        out[m] = {**c.interval(m).as_dict(), "values": c.values.get(m, [])}
    return out


# ------------------------------------------------------------------------------- the files
def write(doc: dict[str, Any], results: dict[Key, dict[str, Any]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "league.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n",
                                        encoding="utf-8")
    (folder / "league.md").write_text(markdown(doc), encoding="utf-8")
    (folder / "league-details.md").write_text(details(doc), encoding="utf-8")
    cols = ("workload", "estimates", "seed", "player", "policy", *METRICS, "stopped_early",
            "wall_s", "cpu_s")
    with (folder / "runs.csv").open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(cols)
        for k, r in results.items():
            out.writerow([k.workload, k.mode, k.seed, k.player, r["policy"],
                          *(r[m] for m in METRICS), r.get("stopped_early") or "",
                          r.get("timing", {}).get("wall_s", ""),
                          r.get("timing", {}).get("cpu_s", "")])


def target_heads(doc: dict[str, Any]) -> dict[str, str]:
    """The targets' column heads, with the league's factor and slack."""
    t = doc["targets"]
    return {"misses": "misses ≤ best other", "utility_sum": "utility sum ≥ best other",
            "penalty": f"penalty ≤ {t['penalty_factor']:g} × best baseline",
            "utility_min": f"U min ≥ best baseline − {t['utility_min_slack']:g}"}


def target_text(t: dict[str, Any]) -> str:
    """A target cell of the table: ✓/✗ with the candidate's mean, the bound and who set it."""
    return _target(t).text()


def _target(t: dict[str, Any]) -> Target:
    nan = math.nan
    return Target("", t["holds"], t["value"] if t["value"] is not None else nan,
                  t["reference"], t["by"], t["bound"], t["better"])


def table_rows(doc: dict[str, Any]) -> list[list[str]]:
    """One row per workload and estimate mode: the workload, the mode, each target's cell and
    what was stopped or excluded."""
    rows = []
    for w in doc["workloads"]:
        for mode, m in w["modes"].items():
            notes = []
            stopped = [f"{n} {c['stopped']}/{len(w['seeds'])}"
                       for n, c in m["players"].items() if c.get("stopped")]
            if stopped:
                notes.append("stopped: " + ", ".join(stopped))
            if w["excluded"]:
                notes.append("excluded: " + ", ".join(w["excluded"]))
            rows.append([w["name"], mode, *(target_text(m["targets"][t]) for t in TARGETS),
                         "; ".join(notes)])
    return rows


def markdown(doc: dict[str, Any]) -> str:
    t = doc["targets"]
    heads = target_heads(doc)
    lines = [f"### League, {doc['set']} set: candidate `{doc['candidate']}`"
             + (f" (`{doc['candidate_policy']}`)" if doc["candidate_policy"] != doc["candidate"]
                else "")
             + f", means over {doc['seeds']} seed(s)", "",
             "| workload | estimates | " + " | ".join(heads[k] for k in TARGETS) + " | notes |",
             "| --- | --- | " + " | ".join("---" for _ in TARGETS) + " | --- |"]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(doc)]
    held, judged = doc["held"]["all"], doc["held"]["judged"]
    lines += ["", f"Targets held: {judged[0]} of {judged[1]} with {doc['judged']} estimates, "
              f"{held[0]} of {held[1]} over every mode.  Baselines: "
              f"{', '.join(t['baselines'])}; a stopped competitor is no reference; "
              "`–`: no reference left."]
    if doc.get("max_jobs"):
        lines.append(f"**Cut to {doc['max_jobs']} jobs per workload: a smoke test, not the "
                     "league's result.**")
    notes = [f"* `{w['name']}`: {k} not run: {why}"
             for w in doc["workloads"] for k, why in w["excluded"].items()]
    if notes:
        lines += ["", "Excluded:", "", *notes]
    return "\n".join(lines) + "\n"


def details(doc: dict[str, Any]) -> str:
    """Each player's means (± 95% CI) per workload and mode: what the targets were read from."""
    from utilon.metrics.stats import pm

    lines = [f"# League, {doc['set']} set: every player's means over {doc['seeds']} seed(s)",
             ""]
    for w in doc["workloads"]:
        for mode, m in w["modes"].items():
            lines += [f"## {w['name']} ({mode} estimates)", "",
                      "| player | misses | utility sum | penalty | U min | stopped |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for name, c in m["players"].items():
                if "excluded" in c:
                    lines.append(f"| {name} | not run: {c['excluded']} | | | | |")
                    continue
                lines.append(f"| {name} | {pm(c['misses'], 1)} | {pm(c['utility_sum'], 2)} | "
                             f"{pm(c['penalty'], 2)} | {pm(c['utility_min'], 3)} | "
                             f"{c['stopped'] or ''} |")
            lines.append("")
    return "\n".join(lines)


__all__ = ["Key", "Setup", "details", "document", "grid", "markdown", "prepare", "run_league",
           "setup", "table_rows", "target_heads", "target_text", "write"]
