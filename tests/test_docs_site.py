"""The documentation site builds as `make docs` builds it: `mkdocs build --strict`, so that a
broken link or anchor, a page missing from the nav or a docstring griffe cannot parse fails
here rather than on the next `make docs`."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="the docs extra is not installed (make test and make docs install it)")


class _Loader(yaml.SafeLoader):
    """mkdocs.yml names a Python callable (its slugify); reading the nav needs none of it."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in nav_pages(v)]
    if isinstance(nav, list):
        return [p for v in nav for p in nav_pages(v)]
    return []


def test_reference_pages_document_the_public_api() -> None:
    """The API named in issue 49 has a page, and every page of the reference is in the nav."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    pages = nav_pages(config["nav"])
    api = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs/api").glob("*.md"))
    assert set(api) <= set(pages)
    assert "tutorial-policy.md" in pages
    directives = "\n".join((ROOT / "docs" / p).read_text(encoding="utf-8") for p in api)
    documented = set(re.findall(r"^::: ([\w.]+)", directives, re.MULTILINE))
    for name in ("utilon.core.policy.Policy", "utilon.core.decision.Decision",
                 "utilon.core.decision.Grant", "utilon.core.snapshot.ClusterSnapshot",
                 "utilon.core.snapshot.JobView", "utilon.core.snapshot.StageView",
                 "utilon.core.snapshot.MachineView", "utilon.runner.run_policy",
                 "utilon.scenario.load.load_workload", "utilon.traces.base.Importer",
                 "utilon.traces.api.import_trace", "utilon.jobs.plan.JobPlan"):
        assert name in documented, f"{name} is missing from docs/api/"


@needs_mkdocs
def test_docs_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # (never --quiet: it silences the very warnings that --strict counts)
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if line.startswith(("WARNING", "ERROR")) or "Aborted" in line]
    assert proc.returncode == 0 and not problems, "\n".join(problems) or proc.stderr[-3000:]
    assert (site / "index.html").is_file()
    policy = (site / "api" / "policy" / "index.html").read_text(encoding="utf-8")
    # the reference is rendered from the docstrings, not left as a ::: directive
    assert "def decide" not in policy and ":::" not in policy
    assert "Return the decision for this snapshot" in policy
    tutorial = (site / "tutorial-policy" / "index.html").read_text(encoding="utf-8")
    assert "LeastLaxity" in tutorial
