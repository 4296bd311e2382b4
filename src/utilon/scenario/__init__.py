"""Scenario files: the format (spec), sampling, building and loading."""

from utilon.scenario.build import Workload, build_cluster, build_workload
from utilon.scenario.load import (
    load_scenario,
    load_workload,
    parse_scenario,
    read_scenario,
    scenario_json_schema,
)
from utilon.scenario.spec import ScenarioSpec

__all__ = ["ScenarioSpec", "Workload", "build_cluster", "build_workload", "load_scenario",
           "load_workload",
           "parse_scenario", "read_scenario", "scenario_json_schema"]
