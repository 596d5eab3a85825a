"""The store page in a real Airflow API server, seen through headless Chromium inside the Airflow UI.

A store with known counts and a real audit report (the audit job's CLI) are set up; an Airflow
api-server with this project's plugin runs against the test keyspace; the browser logs in,
opens the page from the UI (the external view's frame) and the assertions read what it shows.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import tests.airflow_env as airflow_env

# isort: split
import pytest

from statestore.core.windows import SessionSpec, WindowSpec
from statestore.maintenance import cli as maintenance_cli
from statestore.store import admin, stream_log
from statestore.store.builder import StoreBuilder, open_store
from statestore.store.session import SessionKey
from statestore.store.status import stream_status
from statestore.store.stream_log import BatchRecord, Totals

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
PASSWORD = "page-test-password"
STORE = "page_words"
COUNTS = {"river": 41, "stone": 17, "lantern": 17, "moss": 5, "ash": 2, "fern": 1}
# Listed after STORE, which the page selects first.
WINDOWS, SESSIONS = "per_minute_words", "per_session_words"
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
WINDOW_COUNTS = {  # window start (seconds after BASE) -> counts in it
    0: {"river": 3},
    20: {"river": 5, "stone": 2},
    40: {"stone": 9, "moss": 4, "ash": 4},
    60: {"fern": 1},
}
SESSION_SPANS = {("river", 0, 10): 4, ("stone", 5, 95): 12, ("moss", 200, 200): 1, ("river", 100, 130): 2}

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="Debian's chromium and chromium-driver are needed: `make browser` installs them",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except urllib.error.URLError:
        return 0, b""  # not listening (yet)


def _audit(store: str, reports: Path, cassandra_config) -> None:
    """A real audit of `store` through the audit job's command line (Spark in this process)."""
    argv = ["--report-dir", str(reports), "--store", store, "--token-ranges", "4", "--nodetool", "off"]
    argv += ["--cassandra-port", str(cassandra_config.port), "--keyspace", cassandra_config.keyspace]
    assert maintenance_cli.run("audit_partitions", argv) == 0


@pytest.fixture(scope="module")
def api_server(session, keyspace, cassandra_config, tmp_path_factory):
    """An Airflow API server with this project's plugin, over a store with known counts that has
    been audited (the store and the audit are made while the server starts)."""
    airflow_env.migrate_db()
    port = _free_port()
    home = tmp_path_factory.mktemp("api-server")
    reports = home / "reports"
    reports.mkdir()
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"admin": PASSWORD}))
    connection = {"conn_type": "cassandra", "host": "127.0.0.1", "port": cassandra_config.port}
    env = {
        **os.environ,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW_CONN_STATESTORE_CASSANDRA": json.dumps({**connection, "schema": keyspace}),
        "STATESTORE_REPORT_DIR": str(reports),
    }
    log = (home / "api-server.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "airflow"), "api-server", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        admin.create_store(session, keyspace, STORE, "partitioned-kv", 3)
        open_store(session, keyspace, STORE).put_all(COUNTS.items())
        _log_a_stream(session, keyspace)
        _audit(STORE, reports, cassandra_config)
        docs = reports / "validate_idempotency" / STORE / "data_docs"
        docs.mkdir(parents=True)
        (docs / "index.html").write_text("<html><body><h1 id='docs'>Data Docs of page_words</h1></body></html>")
        deadline = time.monotonic() + 180
        while _get(f"{base}/api/v2/monitor/health")[0] != 200:
            assert server.poll() is None, (home / "api-server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the API server did not answer within 180 s"
            time.sleep(1)
        yield base
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        log.close()


# What a stream would have logged for STORE: its run's states and three batches.
BATCH_WORDS_SECONDS = [(300, 1.5), (900, 2.0), (120, 0.4)]


def _log_a_stream(session, keyspace) -> None:
    stream_log.ensure_tables(session, keyspace)
    for state, restart in (("starting", None), ("waiting_for_lease", None), ("running", None), ("running", 2.5)):
        stream_log.record_state(session, keyspace, STORE, state, run_id="run-1", restart_seconds=restart)
    totals = Totals()
    for batch_id, (words, seconds) in enumerate(BATCH_WORDS_SECONDS):
        # Batch i had i dead letters; each row carries the running sums, as the job's rows do.
        reasons = (("invalid-utf8", batch_id),) if batch_id else ()
        totals = totals.plus(3, 0, words, reasons)
        record = BatchRecord(
            batch_id, batch_id, "run-1", None, 3, 3, 0, words, batch_id, seconds, None, None, reasons, totals
        )
        stream_log.record_batch(session, keyspace, STORE, record)
        time.sleep(0.05)  # distinct commit times, as real batches have


@pytest.fixture(scope="module")
def timed_stores(session, keyspace):
    """A hopping-window store and a session store with known contents (put, not streamed)."""
    builder = StoreBuilder(session, WINDOWS).with_keyspace(keyspace)
    windows = builder.partitioned_window_store(WindowSpec(60_000, 20_000), 3).create()
    for second, counts in WINDOW_COUNTS.items():
        for key, count in counts.items():
            assert windows.put(key, count, BASE_MS + second * 1000)
    builder = StoreBuilder(session, SESSIONS).with_keyspace(keyspace)
    sessions = builder.partitioned_session_store(SessionSpec(30_000), 3).create()
    for (key, start, end), count in SESSION_SPANS.items():
        assert sessions.put(SessionKey(key, BASE_MS + start * 1000, BASE_MS + end * 1000), count)
    yield
    for name in (WINDOWS, SESSIONS):  # later tests list every store of the keyspace
        admin.drop_store(session, keyspace, name, confirm=name)


@pytest.fixture(scope="module")
def token(api_server) -> str:
    body = json.dumps({"username": "admin", "password": PASSWORD}).encode()
    request = urllib.request.Request(
        f"{api_server}/auth/token", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["access_token"]


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_and_api_need_an_airflow_login(api_server, token):
    assert _get(f"{api_server}/statestore/")[0] == 401
    assert _get(f"{api_server}/statestore/api/stores")[0] == 401
    status, body = _get(f"{api_server}/statestore/api/stores/page_words/keys/river", token)
    assert status == 200 and json.loads(body)["value"] == 41


def test_the_plugin_registers_the_page_in_the_browse_menu(api_server, token):
    plugins = json.loads(_get(f"{api_server}/api/v2/plugins", token)[1])["plugins"]
    ours = next(p for p in plugins if p["name"] == "statestore")
    assert [a["url_prefix"] for a in ours["fastapi_apps"]] == ["/statestore"]
    view = ours["external_views"][0]
    assert (view["name"], view["href"], view["url_route"], view["category"]) == (
        "State stores",
        "statestore/",
        "statestore",
        "browse",
    )


def test_the_store_page_inside_the_airflow_ui(api_server, token, browser, session, keyspace, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    store = STORE
    browser.get(f"{api_server}/api/v2/monitor/health")  # a page on the server's origin, to set its cookie
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    # From the UI's home page through its Browse menu, as a user gets there.
    browser.get(f"{api_server}/")
    wait = WebDriverWait(browser, 90)
    menu = wait.until(ec.element_to_be_clickable((By.XPATH, "//button[normalize-space(.)='Browse']")))
    menu.click()
    wait.until(
        ec.element_to_be_clickable((By.XPATH, "//*[@role='menuitem'][normalize-space(.)='State stores']"))
    ).click()
    wait.until(ec.url_contains("/plugin/statestore"))
    frame = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='State stores']")))
    assert frame.get_attribute("src").endswith("/statestore/")
    browser.switch_to.frame(frame)
    # The page opens on the keyspace's first store; other tests' stores may sort before ours.
    link = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, f"#stores tr[data-store='{store}'] a")))
    link.click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "top-store"), store))
    wait.until(ec.presence_of_element_located((By.ID, "top-keys")))

    assert browser.find_element(By.ID, "keyspace").text == keyspace
    row = browser.find_element(By.CSS_SELECTOR, f"#stores tr[data-store='{store}']")
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:4] == [store, "partitioned-kv", "-", "3"]
    assert cells[9] == "ok"  # its level in the last audit
    assert browser.find_element(By.ID, "audit-status").text == "ok"
    assert (
        browser.find_element(By.LINK_TEXT, "full report")
        .get_attribute("href")
        .endswith("/statestore/reports/audit_partitions.html")
    )
    assert browser.find_element(By.ID, "top-store").text == store
    top = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in browser.find_elements(By.CSS_SELECTOR, "#top-keys tbody tr")
    ]
    expected = sorted(COUNTS.items(), key=lambda kv: (-kv[1], kv[0]))
    assert top == [[str(i), k, str(v)] for i, (k, v) in enumerate(expected, start=1)]

    # The stream's figures, as the library computes them (statestore.store.status).
    status = stream_status(session, None, keyspace, store)
    assert cells[10:15] == [
        "running",
        "-",  # no position recorded, no Kafka connection here: no lag
        f"{status.words_per_s:,.1f}",
        str(sum(range(len(BATCH_WORDS_SECONDS)))),  # batch i had i dead letters, all within the hour
        "2.5 s",
    ]
    chart = browser.find_element(By.ID, "rate-chart")
    expected_rates = [round(words / seconds, 1) for words, seconds in BATCH_WORDS_SECONDS]
    assert [float(r) for r in chart.get_attribute("data-rates").split(",")] == expected_rates
    assert len(chart.find_element(By.TAG_NAME, "polyline").get_attribute("points").split()) == 3
    docs = browser.find_element(By.ID, "data-docs").get_attribute("href")
    assert docs.endswith(f"/statestore/reports/validate_idempotency/{store}/data_docs/index.html")

    browser.switch_to.default_content()
    screenshot = tmp_path / "store_page.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000
    print(f"screenshot: {screenshot}")


def _utc(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(BASE_MS / 1000 + second)) + ".000Z"


def _rows(browser, selector: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    return [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in browser.find_elements(By.CSS_SELECTOR, selector)
    ]


def test_window_and_session_stores_on_the_page(api_server, token, browser, timed_stores, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{api_server}/api/v2/monitor/health")
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    wait = WebDriverWait(browser, 90)

    browser.get(f"{api_server}/statestore/?store={WINDOWS}&top=2")
    wait.until(ec.presence_of_element_located((By.ID, "latest-windows")))
    row = browser.find_element(By.CSS_SELECTOR, f"#stores tr[data-store='{WINDOWS}']")
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:3] == [WINDOWS, "partitioned-window", "1m hopping windows (hop 20s), grace 0s, retention 1d"]
    assert browser.find_element(By.ID, "top-store").text == WINDOWS
    # The three newest windows, newest first, each with its two highest counts (ties by key).
    expected = []
    for second in (60, 40, 20):
        ranked = sorted(WINDOW_COUNTS[second].items(), key=lambda kv: (-kv[1], kv[0]))[:2]
        expected += [[_utc(second), _utc(second + 60), str(i), k, str(v)] for i, (k, v) in enumerate(ranked, 1)]
    assert _rows(browser, "#latest-windows tbody tr") == expected
    assert browser.find_elements(By.ID, "top-keys") == []
    screenshot = tmp_path / "window_store_page.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 20_000

    browser.get(f"{api_server}/statestore/?store={SESSIONS}&top=3")
    wait.until(ec.presence_of_element_located((By.ID, "latest-sessions")))
    row = browser.find_element(By.CSS_SELECTOR, f"#stores tr[data-store='{SESSIONS}']")
    assert [td.text for td in row.find_elements(By.TAG_NAME, "td")][:3] == [
        SESSIONS,
        "partitioned-session",
        "sessions, gap 30s, grace 0s, retention 1d",
    ]
    latest = sorted(SESSION_SPANS.items(), key=lambda kv: (kv[0][2], kv[1]), reverse=True)[:3]
    assert _rows(browser, "#latest-sessions tbody tr") == [
        [str(i), key, _utc(start), _utc(end), str(count)] for i, ((key, start, end), count) in enumerate(latest, 1)
    ]


def test_the_key_lookup_and_the_validation_reports(api_server, token, browser, keyspace):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{api_server}/api/v2/monitor/health")
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    wait = WebDriverWait(browser, 90)
    browser.get(f"{api_server}/statestore/?store={STORE}")
    box = wait.until(ec.presence_of_element_located((By.ID, "lookup-key")))
    box.send_keys("river")
    browser.find_element(By.CSS_SELECTOR, "#lookup button").click()
    result = wait.until(ec.presence_of_element_located((By.ID, "lookup-result")))
    assert result.text == "river = 41"
    browser.get(f"{api_server}/statestore/?store={STORE}&key=nothing-here")
    assert (
        wait.until(ec.presence_of_element_located((By.ID, "lookup-result"))).text == "nothing-here is not in the store"
    )

    browser.find_element(By.ID, "data-docs").click()
    assert wait.until(ec.presence_of_element_located((By.ID, "docs"))).text == "Data Docs of page_words"
    base = f"{api_server}/statestore/reports/validate_idempotency"
    assert _get(f"{base}/{STORE}/..%2F..%2Faudit_partitions.json", token)[0] == 404  # never outside the store's reports
    assert _get(f"{base}/{STORE}/data_docs/index.html")[0] == 401  # and only with an Airflow login
