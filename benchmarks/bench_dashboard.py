"""The dashboard with a large store: is the page still responsive at 10,000 jobs?

A store is seeded with ``--jobs`` finished jobs (four tenants), ``utilon serve`` runs on it, and
Debian's Chromium (Playwright) opens the dashboard as an admin.  Measured:

* **first page**: from navigation to the first 50 rows and "1–50 of N" on screen;
* **page switch**: a click on "older" until the next 50 rows show;
* **filter**: choosing a state until the filtered page shows;
* **poll**: the request the page repeats every 1.5 s (``/v1/jobs?live=true&limit=50``), p50
  and p95 over ``--polls`` requests, and ``/metrics``;
* the rows the page holds (it keeps one page, never the whole store).

With ``--screenshots DIR`` it also writes the README's screenshot: a store with a few live
jobs of two tenants.  Results go to ``benchmarks/results-dashboard.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_dashboard import seed_store  # noqa: E402
from test_service import _free_port, _serve, sleepy  # noqa: E402
from utilon.service.tenants import create_token  # noqa: E402


def until(page: object, js: str, timeout: float = 60.0) -> float:
    t0 = time.perf_counter()
    page.wait_for_function(js, timeout=timeout * 1000)  # type: ignore[attr-defined]
    return time.perf_counter() - t0


def measure(n: int, polls: int) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="utilon-bench-dash-") as d:
        tmp = Path(d)
        tok = create_token(tmp / "tenants.yaml", "ops", admin=True)
        seed_store(tmp / "u.db", n)
        port = _free_port()
        proc = _serve(tmp, tmp / "tenants.yaml", port)
        url = f"http://127.0.0.1:{port}"
        try:
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
                page = b.new_page(viewport={"width": 1280, "height": 900})
                page.add_init_script(f"localStorage.setItem('utilon-token', '{tok}')")
                t0 = time.perf_counter()
                page.goto(url + "/")
                page.wait_for_function(f"document.getElementById('range').textContent"
                                       f" === '1–50 of {n}'")
                first = time.perf_counter() - t0
                page.click("#next")
                switch = until(page, f"document.getElementById('range').textContent === "
                               f"'51–100 of {n}'")
                page.select_option("#state-filter", "finished")
                filt = until(page, "document.getElementById('range').textContent"
                             ".startsWith('1–50')")
                rows = page.locator("#jobs tr").count()
                b.close()
            lat, met = [], []
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tok}"}) as c:
                for _ in range(polls):
                    t = time.perf_counter()
                    c.get("/v1/jobs", params={"live": "true", "limit": 50}).raise_for_status()
                    lat.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    c.get("/metrics").raise_for_status()
                    met.append((time.perf_counter() - t) * 1000)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    return {"jobs_in_store": n, "first_page_s": round(first, 3),
            "page_switch_s": round(switch, 3), "filter_s": round(filt, 3),
            "rows_in_page": rows,
            "poll_ms_p50": round(float(np.percentile(lat, 50)), 2),
            "poll_ms_p95": round(float(np.percentile(lat, 95)), 2),
            "metrics_ms_p50": round(float(np.percentile(met, 50)), 2),
            "metrics_ms_p95": round(float(np.percentile(met, 95)), 2)}


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise SystemExit("no Chromium: apt-get install chromium")
    return path


def screenshots(out: Path) -> None:
    """The README's picture: two tenants' jobs, some running, one at risk."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="utilon-shot-") as d:
        tmp = Path(d)
        toks = [create_token(tmp / "tenants.yaml", "etl"),
                create_token(tmp / "tenants.yaml", "adhoc"),
                create_token(tmp / "tenants.yaml", "ops", admin=True)]
        port = _free_port()
        proc = _serve(tmp, tmp / "tenants.yaml", port)
        url = f"http://127.0.0.1:{port}"
        try:
            for who, jobs in ((toks[0], [sleepy("etl-nightly", tasks=4, seconds=6, deadline=90),
                                         sleepy("etl-hourly", tasks=2, seconds=2)]),
                              (toks[1], [sleepy("adhoc-query", tasks=3, seconds=4, deadline=9,
                                                admission="accept"),
                                         sleepy("adhoc-report", tasks=1, seconds=1)])):
                with httpx.Client(base_url=url + "/v1",
                                  headers={"Authorization": f"Bearer {who}"}) as c:
                    for j in jobs:
                        c.post("/jobs", json=j).raise_for_status()
            time.sleep(6)
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
                page = b.new_page(viewport={"width": 1200, "height": 760})
                page.add_init_script(f"localStorage.setItem('utilon-token', '{toks[2]}')")
                page.goto(url + "/")
                page.wait_for_selector('#jobs tr[data-id="etl-nightly"]')
                page.click('#jobs tr[data-id="etl-nightly"]')
                page.wait_for_selector("#detail h2")
                time.sleep(1)
                out.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out / "dashboard-jobs.png"))
                page.click('nav button[data-tab="cluster"]')
                time.sleep(4)
                page.screenshot(path=str(out / "dashboard-cluster.png"))
                b.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--polls", type=int, default=50)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-dashboard.json")
    ap.add_argument("--screenshots", type=Path, default=None,
                    help="also write the README's screenshots into this folder")
    a = ap.parse_args()
    r = measure(a.jobs, a.polls)
    print(f"dashboard at {r['jobs_in_store']} jobs: first page {r['first_page_s']} s, page "
          f"switch {r['page_switch_s']} s, filter {r['filter_s']} s, {r['rows_in_page']} rows "
          f"in the page; poll p50 {r['poll_ms_p50']} ms / p95 {r['poll_ms_p95']} ms; /metrics "
          f"p50 {r['metrics_ms_p50']} ms / p95 {r['metrics_ms_p95']} ms")
    a.out.write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
    if a.screenshots is not None:
        screenshots(a.screenshots)
        print(f"screenshots: {a.screenshots}/dashboard-jobs.png, dashboard-cluster.png")


if __name__ == "__main__":
    main()
