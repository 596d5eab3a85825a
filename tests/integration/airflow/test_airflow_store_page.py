"""The store page in a real Airflow API server, seen through headless Chromium inside the Airflow UI.

A store with known counts, a stream log with known batches and state changes (its run killed,
then a second writer refused at the lease) and a real audit report (the audit job's CLI) are set
up; an Airflow api-server with this project's plugin runs against the test keyspace; the browser
logs in, opens the list from the UI (the external view's frame) and a store's page, and the
assertions read what they show: the list fits 1280 px, the charts hold one mark per batch, the
state is the writer's run's. Screenshots of both go to docs/images (the docs show them).
The same server, with the DAGs parsed into its database, shows state_store_admin's trigger
form: Trigger enabled as the form opens, and a click triggers a run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import tests.airflow_env as airflow_env

# isort: split
import pytest

from statestore.core.windows import SessionSpec, WindowSpec
from statestore.maintenance import main as maintenance_main
from statestore.store import admin
from statestore.store.book import registry, stream_log
from statestore.store.book.registry import BatchPosition
from statestore.store.book.status import stream_status
from statestore.store.book.stream_log import BatchRecord, Totals
from statestore.store.builder import StoreBuilder, open_store
from statestore.store.session import SessionKey
from tests.integration.conftest import free_port

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "images"
WIDTH = 1280  # the list fits a window this wide
PASSWORD = "page-test-password"
STORE = "page_words"
COUNTS = {"river": 1_234_567, "stone": 17, "lantern": 17, "moss": 5, "ash": 2, "fern": 1}
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
    assert maintenance_main.run("audit_partitions", argv) == 0


@pytest.fixture(scope="module")
def api_server(session, keyspace, cassandra_config, tmp_path_factory):
    """An Airflow API server with this project's plugin, over a store with known counts that has
    been audited (the store and the audit are made while the server starts)."""
    airflow_env.migrate_db()
    port = free_port()
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


# What a stream would have logged for STORE: one run's states and batches, the run killed (no
# `stopped`), then a second writer that asked for the lease and was refused.
RUN, REFUSED_RUN = "page-host:101:run1", "page-host:202:late"
RUN_STATES = ("starting", "waiting_for_lease", "running", "running")
# Per batch: words, seconds, rows written, event-time lag in s (None: no event time recorded).
BATCHES = [(300, 1.5, 3, None), (900, 2.0, 5, 4.0), (120, 0.4, 2, 1.5), (0, 0.2, 0, None), (450, 0.9, 4, 2.5)]


def _log_a_stream(session, keyspace) -> None:
    stream_log.ensure_tables(session, keyspace)
    for state, restart in zip(RUN_STATES, (None, None, None, 2.5), strict=True):
        stream_log.record_state(session, keyspace, STORE, state, run_id="run-1", restart_seconds=restart, writer=RUN)
    totals = Totals()
    for batch_id, (words, seconds, written, lag_s) in enumerate(BATCHES):
        # Batch i had i dead letters; each row carries the running sums, as the job's rows do.
        reasons = (("invalid-utf8", batch_id),) if batch_id else ()
        totals = totals.plus(written, 0, words, reasons)
        event_ms = None if lag_s is None else int(time.time() * 1000 - lag_s * 1000)
        record = BatchRecord(
            batch_id=batch_id,
            spark_batch_id=batch_id,
            run_id="run-1",
            keys=written,
            written=written,
            skipped=0,
            words=words,
            dead_letters=batch_id,
            seconds=seconds,
            end_offsets=None,
            max_event_time_ms=event_ms,
            dead_letter_reasons=reasons,
            totals=totals,
        )
        stream_log.record_batch(session, keyspace, STORE, record)
        time.sleep(0.05)  # distinct commit times, as real batches have
    # The store's progress, as the run's last batch left it (unfenced, as seeding tools write it).
    spec = registry.lookup(session, keyspace, STORE)
    registry.record_batch(
        session,
        spec,
        BatchPosition(batch_id=len(BATCHES) - 1, write_ts=time.time_ns() // 1000, start=None, end=None),
        event_ms,
    )
    for state in ("starting", "waiting_for_lease", "refused"):
        reason = f"store '{STORE}' is being written by {RUN}" if state == "refused" else None
        stream_log.record_state(session, keyspace, STORE, state, reason=reason, writer=REFUSED_RUN)


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
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WIDTH},1000"):
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
    assert status == 200 and json.loads(body)["value"] == COUNTS["river"]
    assert _get(f"{api_server}/statestore/stores/{STORE}")[0] == 401


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


def _login(browser, api_server: str, token: str):
    """The browser on the server's origin with the token's cookie; a wait of up to 90 s."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{api_server}/api/v2/monitor/health")  # a page on the server's origin, to set its cookie
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    return WebDriverWait(browser, 90)


def _cells(element) -> list[str]:
    from selenium.webdriver.common.by import By

    return [td.text for td in element.find_elements(By.TAG_NAME, "td")]


def _rows(browser, selector: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    return [_cells(tr) for tr in browser.find_elements(By.CSS_SELECTOR, selector)]


def _screenshot(browser, name: str) -> None:
    """The whole page at the list's width, for the docs (docs/images/NAME), when asked for with
    STATESTORE_SCREENSHOTS=1 (a plain test run leaves the committed pictures alone)."""
    if os.environ.get("STATESTORE_SCREENSHOTS") != "1":
        return
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(WIDTH, height + 140)  # the window's frame takes some of its height
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    try:
        assert browser.save_screenshot(str(path))
    finally:
        browser.set_window_size(WIDTH, 1000)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


EXACT_UTC = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC")
AGO = re.compile(r"just now|\d+ (s|min|h|d)( \d+ (s|min|h))? ago")


def test_the_store_list_inside_the_airflow_ui(api_server, token, browser, session, keyspace, timed_stores):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait = _login(browser, api_server, token)
    # From the UI's home page through its Browse menu, as a user gets there.
    browser.get(f"{api_server}/")
    menu = wait.until(ec.element_to_be_clickable((By.XPATH, "//button[normalize-space(.)='Browse']")))
    menu.click()
    wait.until(
        ec.element_to_be_clickable((By.XPATH, "//*[@role='menuitem'][normalize-space(.)='State stores']"))
    ).click()
    wait.until(ec.url_contains("/plugin/statestore"))
    frame = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "iframe[title='State stores']")))
    assert frame.get_attribute("src").endswith("/statestore/")
    browser.switch_to.frame(frame)
    row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f"#stores tr[data-store='{STORE}']")))
    assert browser.find_element(By.ID, "keyspace").text == keyspace
    # Nothing to scroll sideways inside the UI's frame either (narrower than the window).
    assert browser.execute_script("return document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#stores thead th")]
    assert headers == [
        "store", "type", "stream", "last batch", "lag", "words/s", "dead letters (1 h)", "size", "audit"
    ]  # fmt: skip
    status = stream_status(session, None, keyspace, STORE)
    cells = _cells(row)
    # The killed run's state, not the refused second writer's; no driver holds the lease.
    assert cells[2] == "running · no writer"
    assert cells[:2] == [STORE, "partitioned-kv"]
    assert cells[4:7] == ["-", f"{status.words_per_s:,.1f}", str(sum(range(len(BATCHES))))]
    # Its last batch and when, in the viewer's words, the exact time on hover.
    batch, when = cells[3].split(" · ")
    assert batch == str(len(BATCHES) - 1) and AGO.fullmatch(when)
    assert EXACT_UTC.fullmatch(row.find_element(By.TAG_NAME, "time").get_attribute("title"))
    assert cells[8] == "ok"  # its level in the last audit
    assert status.state == "running" and not status.writer_up  # as `statestore status` says
    window_row = browser.find_element(By.CSS_SELECTOR, f"#stores tr[data-store='{WINDOWS}']")
    assert _cells(window_row)[:3] == [WINDOWS, "partitioned-window", "never streamed"]
    # The audit's time in the viewer's words, the exact time on hover.
    generated = browser.find_element(By.CSS_SELECTOR, "#audit time")
    assert AGO.fullmatch(generated.text) and EXACT_UTC.fullmatch(generated.get_attribute("title"))

    # The page on its own in a 1280 px window: no horizontal scroll.
    browser.switch_to.default_content()
    browser.get(f"{api_server}/statestore/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f"#stores tr[data-store='{STORE}']")))
    assert browser.execute_script("return window.innerWidth") <= WIDTH
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH
    _screenshot(browser, "store-list.png")
    browser.find_element(By.LINK_TEXT, STORE).click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "store-name"), STORE))
    assert browser.current_url == f"{api_server}/statestore/stores/{STORE}"


def _chart(browser, chart_id: str):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, chart_id)


def _marks(chart, css: str) -> list:
    from selenium.webdriver.common.by import By

    return chart.find_elements(By.CSS_SELECTOR, css)


def test_a_stores_page_draws_its_batches_and_states(api_server, token, browser, session, keyspace):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait = _login(browser, api_server, token)
    browser.get(f"{api_server}/statestore/stores/{STORE}")
    wait.until(ec.presence_of_element_located((By.ID, "chart-duration")))
    assert browser.find_element(By.ID, "store-name").text == STORE

    # One point (or bar) per logged batch, oldest first, with its value on hover.
    duration = _chart(browser, "chart-duration")
    assert duration.get_attribute("data-count") == str(len(BATCHES))
    assert len(_marks(duration, "polyline.series")[0].get_attribute("points").split()) == len(BATCHES)
    hovers = [c.get_attribute("textContent") for c in _marks(duration, "circle.point title")]
    assert [h.split(": ")[1] for h in hovers] == [f"{seconds:g} s" for _, seconds, _, _ in BATCHES]
    assert all(h.startswith(f"batch {i} · ") for i, h in enumerate(hovers))
    written = _chart(browser, "chart-written")
    assert [float(b.get_attribute("data-value")) for b in _marks(written, "rect.bar")] == [w for _, _, w, _ in BATCHES]
    lag = _chart(browser, "chart-lag")  # only the batches that recorded an event time
    lagged = [lag_s for *_, lag_s in BATCHES if lag_s is not None]
    assert len(_marks(lag, "polyline.series")[0].get_attribute("points").split()) == len(lagged)
    # Each batch's lag: its commit (the server's clock) after its event time (this one's).
    for circle, lag_s in zip(_marks(lag, "circle.point title"), lagged, strict=True):
        assert abs(float(circle.get_attribute("textContent").split(": ")[1].removesuffix(" s")) - lag_s) < 1.0
    letters = _chart(browser, "chart-dead-letters")  # per hour over the last 6; all of them in the last
    values = [float(b.get_attribute("data-value")) for b in _marks(letters, "rect.bar")]
    assert values == [0.0] * 5 + [float(sum(range(len(BATCHES))))]
    for chart in (duration, written, lag, letters):  # axes with labels, drawn on the server
        assert chart.tag_name == "svg" and len(_marks(chart, "line.axis")) == 2 and _marks(chart, "text")

    # The states as a timeline: one mark per change, one lane per run, the refusal its own.
    timeline = _chart(browser, "chart-states")
    changes = [m.get_attribute("data-state") for m in _marks(timeline, "rect.state-change")]
    assert sorted(changes) == sorted([*RUN_STATES, "starting", "waiting_for_lease", "refused"])
    lanes = {t.get_attribute("textContent") for t in _marks(timeline, "text title")}
    assert lanes == {RUN, REFUSED_RUN}
    state = browser.find_element(By.ID, "stream-state")
    assert state.text.startswith("running · no writer since ")
    since = state.find_element(By.TAG_NAME, "time")
    assert AGO.fullmatch(since.text) and EXACT_UTC.fullmatch(since.get_attribute("title"))
    assert browser.find_element(By.ID, "dead-letters-hour").text == f"{sum(range(len(BATCHES)))} in the last hour"
    assert browser.find_element(By.ID, "restart").text.startswith("2.5 s, ")

    # The top keys, numbers grouped; the latest audit (its verdict from the history) and validation.
    expected = sorted(COUNTS.items(), key=lambda kv: (-kv[1], kv[0]))
    assert _rows(browser, "#top-keys tbody tr") == [[str(i), k, f"{v:,}"] for i, (k, v) in enumerate(expected, 1)]
    assert browser.find_element(By.ID, "audit-link").get_attribute("href") == (
        f"{api_server}/statestore/reports/audit_partitions.html"
    )
    assert browser.find_element(By.ID, "audit-verdict").text == "ok"
    docs = browser.find_element(By.ID, "data-docs").get_attribute("href")
    assert docs == f"{api_server}/statestore/reports/validate_idempotency/{STORE}/data_docs/index.html"
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH
    _screenshot(browser, "store-detail.png")


def _utc(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(BASE_MS / 1000 + second)) + ".000Z"


def test_window_and_session_stores_on_their_pages(api_server, token, browser, timed_stores):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait = _login(browser, api_server, token)
    browser.get(f"{api_server}/statestore/stores/{WINDOWS}?top=2")
    wait.until(ec.presence_of_element_located((By.ID, "latest-windows")))
    assert "1m hopping windows (hop 20s), grace 0s, retention 1d" in browser.find_element(By.CSS_SELECTOR, ".sub").text
    # The three newest windows, newest first, each with its two highest counts (ties by key).
    expected = []
    for second in (60, 40, 20):
        ranked = sorted(WINDOW_COUNTS[second].items(), key=lambda kv: (-kv[1], kv[0]))[:2]
        expected += [[_utc(second), _utc(second + 60), str(i), k, str(v)] for i, (k, v) in enumerate(ranked, 1)]
    assert _rows(browser, "#latest-windows tbody tr") == expected
    assert browser.find_elements(By.ID, "top-keys") == [] and browser.find_elements(By.ID, "lookup") == []
    # No stream has logged a batch: the charts say so, with nothing drawn.
    assert _chart(browser, "chart-duration").get_attribute("data-count") == "0"
    assert browser.find_element(By.ID, "no-lag")

    browser.get(f"{api_server}/statestore/stores/{SESSIONS}?top=3")
    wait.until(ec.presence_of_element_located((By.ID, "latest-sessions")))
    assert "sessions, gap 30s, grace 0s, retention 1d" in browser.find_element(By.CSS_SELECTOR, ".sub").text
    latest = sorted(SESSION_SPANS.items(), key=lambda kv: (kv[0][2], kv[1]), reverse=True)[:3]
    assert _rows(browser, "#latest-sessions tbody tr") == [
        [str(i), key, _utc(start), _utc(end), str(count)] for i, ((key, start, end), count) in enumerate(latest, 1)
    ]


def test_the_key_lookup_and_the_validation_reports(api_server, token, browser, keyspace):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait = _login(browser, api_server, token)
    browser.get(f"{api_server}/statestore/?store={STORE}")  # the page's earlier address of a store
    box = wait.until(ec.presence_of_element_located((By.ID, "lookup-key")))
    assert browser.current_url == f"{api_server}/statestore/stores/{STORE}"
    box.send_keys("river")
    browser.find_element(By.CSS_SELECTOR, "#lookup button").click()
    result = wait.until(ec.presence_of_element_located((By.ID, "lookup-result")))
    assert result.text == f"river = {COUNTS['river']}"
    browser.get(f"{api_server}/statestore/stores/{STORE}?key=nothing-here")
    assert (
        wait.until(ec.presence_of_element_located((By.ID, "lookup-result"))).text == "nothing-here is not in the store"
    )

    browser.find_element(By.ID, "data-docs").click()
    assert wait.until(ec.presence_of_element_located((By.ID, "docs"))).text == "Data Docs of page_words"
    base = f"{api_server}/statestore/reports/validate_idempotency"
    assert _get(f"{base}/{STORE}/..%2F..%2Faudit_partitions.json", token)[0] == 404  # never outside the store's reports
    assert _get(f"{base}/{STORE}/data_docs/index.html")[0] == 401  # and only with an Airflow login
    assert _get(f"{api_server}/statestore/stores/no_such_store", token)[0] == 404
    assert _get(f"{api_server}/statestore/stores/Not-A-Name", token)[0] == 404


@pytest.fixture(scope="module")
def dags_serialized(api_server):
    """The project's DAGs parsed into the API server's database, as its DAG processor would."""
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "dags", "reserialize"], check=True, capture_output=True, timeout=300)


def test_state_store_admin_can_be_triggered_from_its_form(api_server, token, browser, dags_serialized):
    """Its trigger form, left as it opens (action describe, every other field at its default, the
    drop's confirmation empty), has Trigger enabled, and a click triggers a run with those
    params (issue 46: an empty required confirmation kept Trigger disabled for every action)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    def runs() -> list[dict]:
        status, body = _get(f"{api_server}/api/v2/dags/state_store_admin/dagRuns", token)
        return json.loads(body)["dag_runs"] if status == 200 else []

    # Runs of the DAG other tests left in the shared metadata database (dag.test()) are not this one.
    earlier = {run["dag_run_id"] for run in runs()}
    wait = _login(browser, api_server, token)
    browser.get(f"{api_server}/dags/state_store_admin")
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid='trigger-dag-button']"))).click()
    submit = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='trigger-dag-submit']")))
    wait.until(lambda _: submit.is_enabled(), "the form's Trigger button stays disabled")
    submit.click()

    def new_runs() -> list[dict]:
        return [run for run in runs() if run["dag_run_id"] not in earlier]

    wait.until(lambda _: new_runs(), "no run triggered by the form")
    [run] = new_runs()
    assert run["conf"]["action"] == "describe" and run["conf"].get("confirm") is None
    request = urllib.request.Request(
        f"{api_server}/api/v2/dags/state_store_admin/dagRuns/{run['dag_run_id']}",
        method="DELETE",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # nothing left queued for other tests
        assert response.status == 204
