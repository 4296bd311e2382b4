"""The dashboard in a real browser (Playwright driving Debian's Chromium), and /metrics.

The page is driven through submit -> watch -> cancel, and what it shows is checked against
the API; a tenant's token shows only that tenant's jobs; past runs open; 10,000 jobs in the
store page 50 at a time.  Screenshots go to the test's folder.  Without Chromium the browser
tests skip (``make test`` installs it when it can).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_service import _free_port, _serve, sleepy, wait_for
from utilon.service.client import Client
from utilon.service.store import Store
from utilon.service.tenants import create_token

pytestmark = [pytest.mark.live, pytest.mark.browser]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from utilon.runner import run_policy
    from utilon.scenario import load_workload

    tmp = tmp_path_factory.mktemp("dash")
    tenants = tmp / "tenants.yaml"
    toks = {"a": create_token(tenants, "team-a"), "b": create_token(tenants, "team-b"),
            "admin": create_token(tenants, "ops", admin=True)}
    runs = tmp / "runs"
    run_policy(load_workload(ROOT / "examples" / "small-mapreduce.yaml"), "edf-p",
               out_dir=runs / "small" / "edf-p")
    port = _free_port()
    proc = _serve(tmp, tenants, port, "--runs", str(runs))
    try:
        yield {"url": f"http://127.0.0.1:{port}", "tmp": tmp, **toks}
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium when it can "
                    "(apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def page_for(browser: Any, server: dict[str, Any], who: str) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(server["url"] + "/")
    page.fill("#token", server[who])
    page.click("#login button")
    return page


def row_state(page: Any, job_id: str) -> str:
    cell = page.locator(f'#jobs tr[data-id="{job_id}"] td[data-col="state"]')
    return str(cell.inner_text()) if cell.count() else ""


def test_submit_watch_cancel_in_the_page(browser: Any, server: dict[str, Any]) -> None:
    page = page_for(browser, server, "a")
    page.click('nav button[data-tab="submit"]')
    page.fill("#job-json", json.dumps(sleepy("web-1", tasks=2, seconds=30, deadline=600)))
    page.click("#submit-job")
    page.wait_for_selector('#jobs tr[data-id="web-1"]')
    assert "submitted web-1" in page.inner_text("#message")
    with Client(server["url"], server["a"]) as api:
        wait_for(lambda: row_state(page, "web-1") == "running", what="the page to show running")
        assert api.job("web-1")["state"] == "running"
        row = page.locator('#jobs tr[data-id="web-1"]')
        assert "on-track" in row.inner_text()  # its deadline is far
        assert api.job("web-1")["live"]["deadline_status"] == "on-track"
        page.wait_for_selector("#detail h2")  # the page opened the job it submitted
        assert "web-1" in page.inner_text("#detail h2")
        assert page.locator("#detail table").first.inner_text().count("s") >= 1
        # issue 48: the scheduler's story of the job, with the decision that granted it
        wait_for(lambda: "granted (d" in page.inner_text('[data-testid="story"]'),
                 what="the detail's story")
        page.screenshot(path=str(server["tmp"] / "dashboard-running.png"), full_page=True)
        page.click("#cancel")
        wait_for(lambda: row_state(page, "web-1") == "cancelled",
                 what="the page to show cancelled")
        assert api.job("web-1")["state"] == "cancelled"
        # issue 46: a cancelled job has no deadline status, in its row and in its detail
        wait_for(lambda: "on-track" not in page.locator('#jobs tr[data-id="web-1"]')
                 .inner_text(), what="the row to drop its deadline status")
        wait_for(lambda: "cancelled" in page.inner_text("#detail h2"), what="the detail")
        assert page.locator("#detail .mark").count() == 0
    page.screenshot(path=str(server["tmp"] / "dashboard-cancelled.png"), full_page=True)
    page.close()


def test_switching_tokens_clears_every_pane(browser: Any, server: dict[str, Any]) -> None:
    """Issue 46: after a token switch the detail pane kept another tenant's job, with a
    Cancel button."""
    with Client(server["url"], server["a"]) as a:
        a.submit(sleepy("switch-a", tasks=1, seconds=30, deadline=600))
    page = page_for(browser, server, "a")
    page.wait_for_selector('#jobs tr[data-id="switch-a"]')
    page.click('#jobs tr[data-id="switch-a"]')
    page.wait_for_selector("#detail h2")
    assert page.locator("#cancel").count() == 1
    page.fill("#token", server["b"])
    page.click("#login button")
    page.wait_for_timeout(300)  # past the switch, before and after the next poll
    assert page.locator("#detail").is_hidden() and page.locator("#cancel").count() == 0
    assert "switch-a" not in page.inner_text("#jobs")
    page.wait_for_timeout(2000)
    assert page.locator("#detail").is_hidden() and "switch-a" not in page.inner_text("#jobs")
    with Client(server["url"], server["a"]) as a:
        a.cancel("switch-a")
    page.close()


def test_a_bad_job_is_one_line_on_the_page(browser: Any, server: dict[str, Any]) -> None:
    page = page_for(browser, server, "a")
    page.click('nav button[data-tab="submit"]')
    page.fill("#job-json", json.dumps({"id": "bad", "stages": []}))
    page.click("#submit-job")
    wait_for(lambda: "422" in page.inner_text("#message"), what="the error")
    page.fill("#job-json", "{not json")
    page.click("#submit-job")
    wait_for(lambda: "not valid JSON" in page.inner_text("#message"), what="the JSON error")
    page.close()


def test_a_tenant_sees_only_its_jobs(browser: Any, server: dict[str, Any]) -> None:
    with Client(server["url"], server["a"]) as a, Client(server["url"], server["b"]) as b:
        a.submit(sleepy("iso-a", seconds=0.05))
        b.submit(sleepy("iso-b", seconds=0.05))
    page = page_for(browser, server, "b")
    page.wait_for_selector('#jobs tr[data-id="iso-b"]')
    ids = page.locator("#jobs tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert "iso-b" in ids and "iso-a" not in ids
    assert all(t == "team-b" for t in page.locator("#jobs tr td:nth-child(2)").all_inner_texts())
    page.close()
    admin = page_for(browser, server, "admin")
    admin.wait_for_selector('#jobs tr[data-id="iso-a"]')
    admin.wait_for_selector('#jobs tr[data-id="iso-b"]')
    admin.close()


def test_cluster_tab_draws_allocation_and_latency(browser: Any,
                                                  server: dict[str, Any]) -> None:
    with Client(server["url"], server["a"]) as a:
        a.submit(sleepy("busy-1", tasks=2, seconds=3, deadline=600))
    page = page_for(browser, server, "admin")
    page.click('nav button[data-tab="cluster"]')
    page.wait_for_selector('#alloc polygon[data-series="team-a"]', timeout=15000)
    assert page.locator('#alloc polyline[data-series="capacity"]').count() == 1
    assert "decision latency of " in page.inner_text("#latency")  # (the default policy)
    assert page.locator("#machines tr").count() == len(Client(server["url"], server["admin"])
                                                         .cluster()["machines"])
    page.screenshot(path=str(server["tmp"] / "dashboard-cluster.png"), full_page=True)
    page.close()


def test_past_runs_open_in_the_same_page(browser: Any, server: dict[str, Any]) -> None:
    page = page_for(browser, server, "admin")
    page.click('nav button[data-tab="runs"]')
    page.wait_for_selector('#runs tr[data-run="small/edf-p"]')
    page.click('#runs tr[data-run="small/edf-p"] a')
    page.wait_for_selector("#run-alloc polygon")
    text = page.inner_text("#run")
    assert "small-mapreduce" in text and "edf-p" in text
    summary = json.loads((server["tmp"] / "runs" / "small" / "edf-p" / "summary.json")
                         .read_text())
    assert f"{summary['jobs']}" in text
    page.close()


def test_metrics_in_prometheus_format(server: dict[str, Any]) -> None:
    import httpx

    with Client(server["url"], server["a"]) as a:
        a.submit(sleepy("m-1", seconds=0.05))
        wait_for(lambda: a.job("m-1")["state"] == "finished", what="m-1")
    assert httpx.get(server["url"] + "/metrics").status_code == 401
    text = httpx.get(server["url"] + "/metrics",
                     headers={"Authorization": f"Bearer {server['admin']}"}).text
    assert 'utilon_jobs{state="finished",tenant="team-a"}' in text
    assert "utilon_decision_latency_seconds_bucket" in text
    assert 'utilon_deadline_misses_total{tenant="team-a"}' in text
    assert "utilon_queue_length" in text and "utilon_up 1.0" in text


def test_ten_thousand_jobs_page_fifty_at_a_time(browser: Any, tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.yaml"
    tok = create_token(tenants, "ops", admin=True)
    seed_store(tmp_path / "u.db", 10_000)
    port = _free_port()
    proc = _serve(tmp_path, tenants, port)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/")
        page.fill("#token", tok)
        page.click("#login button")
        wait_for(lambda: page.inner_text("#range") == "1–50 of 10000", what="the first page")
        assert page.locator("#jobs tr").count() == 50
        page.click("#next")
        wait_for(lambda: page.inner_text("#range") == "51–100 of 10000", what="page two")
        page.select_option("#state-filter", "finished")
        wait_for(lambda: page.inner_text("#range").endswith("of 10000"), what="the filter")
        page.close()
    finally:
        proc.kill()
        proc.wait(10)


def seed_store(db: Path, n: int) -> None:
    """``n`` finished jobs written straight into a store (what 10,000 submissions leave)."""
    import sqlalchemy as sa

    from utilon.service.store import events, jobs

    store = Store(str(db))
    store.begin_incarnation(time.time() - 3600)
    rows = [{"id": f"j{i:05d}", "tenant": f"t{i % 4}", "spec": "{}", "state": "finished",
             "submitted": float(i), "goal": i + 60.0, "started": i + 1.0,
             "finished": i + 30.0 + (i % 50), "cancel_requested": False, "reason": "",
             "missed": i % 50 > 30, "utility": 0.0 if i % 50 > 30 else 1.0,
             "result": json.dumps({"row": {"id": f"j{i:05d}", "missed": i % 50 > 30,
                                           "utility": 0.0 if i % 50 > 30 else 1.0}})}
            for i in range(n)]
    with store.tx() as c:
        c.execute(sa.insert(jobs), rows)
        c.execute(sa.insert(events), [{"job": r["id"], "at": r["finished"], "kind": "finished",
                                       "detail": "", "incarnation": 0} for r in rows])
    store.close()
