"""Fuzzing every trace importer: any file is either a scenario (or cluster) that loads, or one
line naming the file (and the line, where there is one).

For each kind: a few lines (or a small document) in the real format, with fields replaced by
extreme or ill-typed values (1e23, 9.2e18, -1, NaN, '', garbage, extra or missing columns) or
garbage lines added; and arbitrary bytes.  ``max_bad`` is drawn too, so that a malformed line
is sometimes an error and sometimes skipped -- which lets the rest of the file reach the deeper
layers (sizing, stages, the scenario that ``utilon simulate`` would read).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuzzing import assert_clean_error, fuzz_settings, fuzz_task_limit
from utilon.cli.app import app
from utilon.errors import UtilonError
from utilon.scenario.build import build_cluster
from utilon.scenario.load import load_workload, parse_scenario, with_capacity_file
from utilon.traces.api import ImportResult, import_trace, write_scenario

ROOT = Path(__file__).resolve().parents[1]
GOOGLE_CAP = ('{"time":"%s","machine_id":"%s","type":"%s","switch_id":"s",'
              '"capacity":{"cpus":%s,"memory":%s},"platform_id":"p"}')
LINES: dict[str, tuple[str, list[list[str]], str]] = {
    # kind: (header, rows as fields, separator)
    "swim": ("", [["job0", "9", "9", "1762", "0", "14347"],
                  ["job1", "18", "9", "970", "609", "697"],
                  ["job2", "20", "2", "53088744165", "1510005522", "5759777"]], "\t"),
    "alibaba-2017": ("task_create_time,task_end_time,job_id,task_id,number_of_instances,"
                     "status,number_of_cpus_requested_per_instance_in_the_task,"
                     "normalized_memory_requested_per_instance_in_the_task",
                     [["6459", "6524", "3", "4", "15", "Terminated", "50", "0.007956928"],
                      ["6457", "6533", "3", "5", "1", "Terminated", "50", "0.004395206"],
                      ["6500", "6600", "4", "1", "3", "Terminated", "100", "0.01"]], ","),
    "alibaba-2017-servers": ("", [["0", "1148", "add", "", "64", "0.69", "1"],
                                  ["0", "1149", "add", "", "64", "0.69", "1"],
                                  ["500", "1149", "softerror", "", "64", "0.69", "1"]], ","),
    "coflow-fb2010": ("150 3", [["1", "0", "1", "22", "1", "65:1.0"],
                                ["2", "10833", "2", "104", "132", "1", "140:48.0"],
                                ["3", "20000", "1", "5", "2", "7:3.0", "9:1.5"]], " "),
    "solar": ("measured_on,ac_power", [["2016-07-01 00:00:00-07:00", "-2.8601"],
                                       ["2016-07-01 10:00:00-07:00", "1500.5"],
                                       ["2016-07-01 12:00:00-07:00", "3000.0"],
                                       ["2016-07-01 18:00:00-07:00", "200.0"]], ","),
}
ODD = st.one_of(
    st.sampled_from(["1e23", "100000000000000000000000", "9.2e18", "9223372036854775808",
                     "-1", "0", "nan", "NaN", "inf", "-inf", "", " ", "x", "1e999", "0x10",
                     "1_000", "\x00", "é", '"', "{", "}", ":", ",", "\t",
                     # well-formed but at or past utilon's limits (limits.MAX_SECONDS, ...)
                     "999999999", "1000000001", "1000000000000", str(10**17), str(10**18),
                     str(10**18 + 1), "1e-300", "1e300", "5e-7", "1000.5",
                     "9999-12-31 23:59:59", "0001-01-01 00:00:00", "2016-07-01 00:00:00"]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats().map(repr),
    st.text(max_size=12),
)


TINY = {"name": "tiny", "cluster": {"machines": [{"id": "m", "capacity": {"slots": 1}}]},
        "workload": {"jobs": [{"id": "j", "submit": 0, "utility": {"kind": "constant"},
                               "stages": [{"name": "s", "tasks": 1, "duration": 1}]}]}}
"""A scenario whose cluster an imported cluster file replaces (``--capacity``)."""


def _import(kind: str, f: Path, max_bad: float, options: dict[str, Any] | None = None
            ) -> None:
    try:
        with fuzz_task_limit():
            res = import_trace(kind, f, max_bad=max_bad, seed=1, options=options)
    except UtilonError as e:
        # an option's error names the option instead of the file
        assert_clean_error(e, *([] if options else [f.name]))
        return
    _written_loads(res, f)


def _written_loads(res: ImportResult, f: Path) -> None:
    """The imported document, written as ``utilon trace import`` writes it, loads the way
    ``utilon simulate SCENARIO`` (or ``--capacity CLUSTER``) reads it."""
    out = write_scenario(res, f.with_suffix(".imported.yaml"))
    if res.is_scenario:
        load_workload(out)
    else:
        spec = with_capacity_file(parse_scenario(TINY, "tiny"), out)
        build_cluster(spec.cluster, f"{out}: ")


def _google_lines(rows: list[list[str]]) -> list[str]:
    return [GOOGLE_CAP % tuple(r) for r in rows]


GOOGLE_ROWS = [["0", "1", "1", "1", "0.5"], ["0", "2", "1", "0.5", "0.25"],
               ["3600000000", "2", "2", "0.5", "0.25"], ["7200000000", "1", "3", "1", "0.5"]]


@pytest.mark.parametrize("kind", [*sorted(LINES), "google-2019-machines"])
@fuzz_settings()
@given(data=st.data())
def test_mutated_lines(tmp_path_factory: pytest.TempPathFactory, kind: str,
                       data: st.DataObject) -> None:
    if kind == "google-2019-machines":
        header, rows, sep = "", [list(r) for r in GOOGLE_ROWS], None
    else:
        header, base, sep = LINES[kind]
        rows = [list(r) for r in base]
    for _ in range(data.draw(st.integers(1, 4))):
        r = data.draw(st.integers(0, len(rows) - 1))
        op = data.draw(st.sampled_from(["replace", "replace", "drop", "extra", "garbage"]))
        if op == "replace":
            rows[r][data.draw(st.integers(0, len(rows[r]) - 1))] = data.draw(ODD)
        elif op == "drop" and len(rows[r]) > 1:
            rows[r].pop()
        elif op == "extra":
            rows[r].append(data.draw(ODD))
        else:
            rows.insert(r, [data.draw(st.text(max_size=40))])
    lines = (_google_lines([r for r in rows if len(r) == 5]) if sep is None
             else [sep.join(r) for r in rows])
    if sep is None:  # google garbage lines and malformed rows, as text
        lines += [" ".join(r) for r in rows if len(r) != 5]
    text = "\n".join(([header] if header else []) + lines) + "\n"
    f = tmp_path_factory.mktemp(kind) / f"{kind}-trace.txt"
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    _import(kind, f, data.draw(st.sampled_from([0.01, 0.5, 1.0])))


HADOOP = {"sls": "sls-2jobs.json", "synth": "synth-small.json"}


def _leaves(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out += [(*prefix, k), *_leaves(v, (*prefix, k))]
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += [(*prefix, i), *_leaves(v, (*prefix, i))]
    return out


def _sls_docs(text: str) -> list[Any]:
    """An SLS file is a sequence of JSON documents, one after another."""
    dec, docs, i = json.JSONDecoder(), [], 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        docs.append(obj)
    return docs


@pytest.mark.parametrize("kind", sorted(HADOOP))
@fuzz_settings()
@given(data=st.data())
def test_mutated_hadoop_documents(tmp_path_factory: pytest.TempPathFactory, kind: str,
                                  data: st.DataObject) -> None:
    docs = _sls_docs((ROOT / "tests" / "data" / "traces" / HADOOP[kind]).read_text("utf-8"))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(1, 3))):
        d = rnd.randrange(len(docs))
        paths = _leaves(docs[d])
        if not paths:
            continue
        path = paths[rnd.randrange(len(paths))]
        node = docs[d]
        for part in path[:-1]:
            node = node[part]
        value: Any = data.draw(st.one_of(
            st.sampled_from([1e23, 9.2e18, 10**9, 2**64, -1, 0, None, "", "x", [], {}, True]),
            st.floats(allow_nan=False), st.integers(-(10**20), 10**20)))
        node[path[-1]] = copy.deepcopy(value)  # never share a drawn value
    f = tmp_path_factory.mktemp(kind) / f"{kind}-trace.json"
    f.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    _import(kind, f, data.draw(st.sampled_from([0.01, 1.0])))


ALL_KINDS = [*sorted(LINES), "google-2019-machines", *sorted(HADOOP)]


@pytest.mark.parametrize("kind", ALL_KINDS)
@fuzz_settings()
@given(payload=st.binary(max_size=1500), gz=st.booleans())
def test_arbitrary_bytes(tmp_path_factory: pytest.TempPathFactory, kind: str, payload: bytes,
                         gz: bool) -> None:
    f = tmp_path_factory.mktemp(kind) / f"{kind}-bytes.txt"
    f.write_bytes((b"\x1f\x8b" + payload) if gz else payload)  # a corrupt gzip too
    _import(kind, f, 1.0)


# -- the failures reported against utilon, pinned, through the CLI ----------------------------
def _cli_import(kind: str, f: Path, out: Path) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["trace", "import", kind, str(f), "--out", str(out)])
    return res.exit_code, res.output


def test_a_corrupt_google_number_is_a_malformed_line(tmp_path: Path) -> None:
    lines = [*_google_lines(GOOGLE_ROWS), GOOGLE_CAP % ("1e400", "9", "1", "1", "1")]
    f = tmp_path / "machine_events.json"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = _cli_import("google-2019-machines", f, tmp_path / "c.yaml")
    lines_out = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(lines_out) == 1, output
    assert "machine_events.json:5" in lines_out[0] and "Traceback" not in output


def test_a_swim_line_with_a_huge_field_is_malformed_not_a_broken_scenario(
        tmp_path: Path) -> None:
    rows = ["\t".join(r) for r in LINES["swim"][1]]
    rows.append("\t".join(["job3", str(10**23), "1", "100", "0", "100"]))
    f = tmp_path / "fb.tsv"
    f.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, output = _cli_import("swim", f, tmp_path / "s.yaml")
    errs = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(errs) == 1 and "fb.tsv:4" in errs[0], output
    # with --max-bad the line is skipped and the rest imports into a loadable scenario
    res = CliRunner().invoke(app, ["trace", "import", "swim", str(f), "--out",
                                   str(tmp_path / "s.yaml"), "--max-bad", "0.5"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert res.exit_code == 0, res.output


def test_an_endless_line_is_refused_without_reading_it_all(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    from utilon.traces import base

    monkeypatch.setattr(base, "MAX_LINE", 1000)
    f = tmp_path / "long.tsv"
    f.write_text("job0\t" + "9" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(UtilonError) as ei:
        import_trace("swim", f)
    assert_clean_error(ei.value, "long.tsv:1", "longer than")


# -- importer options (--set KEY=VALUE) with extreme values -----------------------------------
NUMERIC_OPTIONS = {
    "swim": ["block_size", "max_maps", "map_rate", "reduce_bytes", "max_reduces",
             "reduce_rate", "task_overhead", "slots_per_machine", "machines"],
    "coflow-fb2010": ["maps_per_rack", "input_ratio", "map_rate", "reduce_rate",
                      "reduce_bytes", "max_reduces_per_rack", "task_overhead",
                      "slots_per_machine"],
    "google-2019-machines": ["default_duration", "default_machines", "slots_per_unit"],
    "solar": ["brown", "normalise", "slots", "cpu", "min_change"],
}
EXTREME = st.sampled_from([1e-300, 1e-9, 1e-3, 0.5, 1, 3, 1e6, 1e9, 1e12, 1e18, 1e300, 10**30,
                           -1, 0, "1e400", "x"])


@pytest.mark.parametrize("kind", sorted(NUMERIC_OPTIONS))
@fuzz_settings(60)
@given(data=st.data())
def test_extreme_options(tmp_path_factory: pytest.TempPathFactory, kind: str,
                         data: st.DataObject) -> None:
    if kind == "google-2019-machines":
        text = "\n".join(_google_lines(GOOGLE_ROWS)) + "\n"
    else:
        header, rows, sep = LINES[kind]
        text = "\n".join(([header] if header else []) + [sep.join(r) for r in rows]) + "\n"
    f = tmp_path_factory.mktemp(kind) / f"{kind}-options.txt"
    f.write_text(text, encoding="utf-8")
    names = data.draw(st.lists(st.sampled_from(NUMERIC_OPTIONS[kind]), min_size=1, max_size=3,
                               unique=True))
    options = {n: data.draw(EXTREME) for n in names}
    if kind == "swim":  # the per-task profile choice, with every numeric option above
        options["profiles"] = data.draw(st.sampled_from(["slots", "ras-table2", "table2", 2]))
    _import(kind, f, 1.0, options)


# -- the derived values of one row are bounded too: such a row is malformed, not a bad scenario
def _cli(*args: str) -> tuple[int, list[str]]:
    res = CliRunner().invoke(app, ["trace", "import", *args])
    errs = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, errs


@pytest.mark.parametrize(("kind", "text", "bad_line"), [
    # a swim job of 1 EB on one machine: its deadline would be decades after its submit
    ("swim", "job0\t9\t9\t1762\t0\t14347\njob1\t18\t9\t970\t609\t697\n"
             f"job2\t20\t2\t{10**18}\t{10**18}\t{10**18}\n", 3),
    ("coflow-fb2010", "150 3\n1 0 1 22 1 65:1.0\n2 10833 2 104 132 1 140:1e300\n"
                      "3 20000 1 5 2 7:3.0 9:1.5\n", 3),
    ("solar", "measured_on,ac_power\n2016-07-01 00:00:00,100\n2016-07-01 01:00:00,50\n"
              "9999-12-31 00:00:00,200\n", 4),
    ("google-2019-machines", "\n".join([*_google_lines(GOOGLE_ROWS),
                                        GOOGLE_CAP % ("7300000000", "1", "3", "1e300", "1")])
     + "\n", 5),
    ("google-2019-machines", "\n".join([*_google_lines(GOOGLE_ROWS),
                                        GOOGLE_CAP % ("9000000000000000", "1", "3", "1", "1")])
     + "\n", 5),
])
def test_a_row_past_the_limits_is_malformed(tmp_path: Path, kind: str, text: str,
                                            bad_line: int) -> None:
    f = tmp_path / "trace.txt"
    f.write_text(text, encoding="utf-8")
    extra = ["--machines", "1"] if kind == "swim" else []
    extra += ["--duration", "1000000000000"] if kind == "google-2019-machines" else []
    code, errs = _cli(kind, str(f), "--out", str(tmp_path / "o.yaml"), *extra)
    assert code == 2 and len(errs) == 1, errs
    assert f"trace.txt:{bad_line}" in errs[0] and "malformed" in errs[0], errs[0]
    code, errs = _cli(kind, str(f), "--out", str(tmp_path / "o.yaml"), "--max-bad", "0.5",
                      *extra)
    assert code == 0 and not errs, errs
    if kind in ("swim", "coflow-fb2010"):
        res = CliRunner().invoke(app, ["validate", str(tmp_path / "o.yaml")])
        assert res.exit_code == 0, res.output
    else:
        spec = with_capacity_file(parse_scenario(TINY, "tiny"), tmp_path / "o.yaml")
        build_cluster(spec.cluster, "o.yaml: ")


def test_an_option_that_overflows_the_sizing_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "fb.tsv"
    f.write_text("\n".join("\t".join(r) for r in LINES["swim"][1]) + "\n", encoding="utf-8")
    code, errs = _cli("swim", str(f), "--out", str(tmp_path / "o.yaml"),
                      "--set", "map_rate=1e-300")
    assert code == 2 and len(errs) == 1, errs
    assert "fb.tsv" in errs[0], errs[0]
