"""The store page's charts (server-side SVG) and its wording of times and numbers. Pure."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from statestore_airflow import charts, words

SVG = "{http://www.w3.org/2000/svg}"


def parse(markup) -> ET.Element:
    return ET.fromstring(str(markup))  # well-formed XML, or this raises


def test_a_line_has_one_point_per_value_scaled_from_zero_to_a_round_top():
    points = [charts.Point(v, f"batch {i}") for i, v in enumerate([1.5, 2.0, 0.4])]
    svg = parse(charts.series_chart("c", points, title="Batch duration", unit="s", first="batch 0", last="batch 2"))
    assert (svg.get("id"), svg.get("data-kind"), svg.get("data-count")) == ("c", "line", "3")
    coords = [tuple(map(float, p.split(","))) for p in svg.find(f"{SVG}polyline").get("points").split()]
    assert len(coords) == 3 and coords[0][0] == charts.LEFT and coords[-1][0] == charts.WIDTH - charts.RIGHT
    bottom = charts.HEIGHT - charts.BOTTOM
    # The top of the axis is 2 (the largest value): 2.0 is at the top, 0.4 a fifth of the way up.
    assert coords[1][1] == charts.TOP
    assert coords[2][1] == pytest.approx(bottom - 0.2 * (bottom - charts.TOP), abs=0.1)
    hovers = [c.find(f"{SVG}title").text for c in svg.iter(f"{SVG}circle")]
    assert hovers == ["batch 0: 1.5 s", "batch 1: 2 s", "batch 2: 0.4 s"]
    labels = [t.text for t in svg.iter(f"{SVG}text")]
    assert {"0", "1", "2", "s", "batch 0", "batch 2"} <= set(labels)


def test_bars_one_per_value_with_grouped_labels():
    points = [charts.Point(v, f"h{i}") for i, v in enumerate([0, 1_234_567, 10])]
    svg = parse(charts.series_chart("b", points, title="rows", unit="rows", kind="bars"))
    bars = list(svg.iter(f"{SVG}rect"))
    assert [b.get("data-value") for b in bars] == ["0", "1.23457e+06", "10"]
    assert float(bars[0].get("height")) == 0 and bars[1].find(f"{SVG}title").text == "h1: 1,234,567 rows"
    assert "2,000,000" in [t.text for t in svg.iter(f"{SVG}text")]  # the axis' round top


def test_an_empty_chart_says_so_and_names_are_escaped():
    svg = parse(charts.series_chart("e", [], title="<b>&", unit="s"))
    assert svg.get("data-count") == "0" and svg.find(f"{SVG}polyline") is None
    assert [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "empty"] == ["nothing recorded"]
    assert svg.find(f"{SVG}title").text == "<b>&"
    with pytest.raises(ValueError):
        charts.series_chart("x", [], title="t", unit="s", kind="pie")


@pytest.mark.parametrize("kind", ["line", "bars"])
def test_one_batch_is_labelled_once_under_its_mark(kind):
    # A store with one batch: its label once, centred under the point (or bar), not "batch 0 ... batch 0".
    svg = parse(
        charts.series_chart(
            "one", [charts.Point(2.0, "batch 0")], title="t", unit="s", kind=kind, first="batch 0", last="batch 0"
        )
    )
    under = [t for t in svg.iter(f"{SVG}text") if t.text and t.text.startswith("batch")]
    assert [(t.text, t.get("text-anchor")) for t in under] == [("batch 0", "middle")]
    mark = next(svg.iter(f"{SVG}circle" if kind == "line" else f"{SVG}rect"))
    centre = float(mark.get("cx")) if kind == "line" else float(mark.get("x")) + float(mark.get("width")) / 2
    assert float(under[0].get("x")) == pytest.approx(centre, abs=0.1)


def test_nice_ceiling_and_figures():
    values = (0, 0.4, 1, 1.2, 2.2, 3, 7, 11, 4000)
    assert [charts.nice_ceiling(v) for v in values] == [1, 0.5, 1, 2, 2.5, 5, 10, 20, 5000]
    assert [charts.figure(v) for v in (0, 2.0, 0.25, 1234.5, 1e6)] == ["0", "2", "0.25", "1,234.5", "1,000,000"]


def test_the_timeline_has_a_lane_per_run_and_a_mark_per_change():
    changes = [
        charts.Change("starting", 1_000, "a", "starting"),
        charts.Change("running", 2_000, "a", "running"),
        charts.Change("starting", 5_000, "b", "starting"),
        charts.Change("refused", 5_010, "b", "refused: held by a"),
    ]
    svg = parse(charts.timeline("t", changes, 11_000))
    marks = list(svg.iter(f"{SVG}rect"))
    assert svg.get("data-count") == "4" and [m.get("data-state") for m in marks] == [
        "starting", "running", "starting", "refused"
    ]  # fmt: skip
    assert len({m.get("y") for m in marks}) == 2  # two lanes
    x_end = charts.WIDTH - charts.RIGHT
    running = next(m for m in marks if m.get("data-state") == "running")
    assert float(running.get("x")) + float(running.get("width")) == pytest.approx(x_end, abs=0.2)  # until now
    refused = next(m for m in marks if m.get("data-state") == "refused")
    assert float(refused.get("width")) <= 4  # an ended run's last change is a tick
    assert parse(charts.timeline("t", [], 1)).get("data-count") == "0"


def test_times_in_the_viewers_words():
    now = 1_767_225_600_000
    said = [words.ago(now - s * 1000, now) for s in (2, 42, 185, 3_725, 90_000)]
    assert said == ["just now", "42 s ago", "3 min ago", "1 h 2 min ago", "1 d ago"]
    assert words.ago(now + 10_000, now) == "in 10 s" and words.ago(None, now) == "never"
    assert words.utc(now + 32) == "2026-01-01 00:00:00.032 UTC"
    assert words.iso(now) == "2026-01-01T00:00:00.000Z" and words.clock(now) == "00:00:00 UTC"
    assert re.fullmatch(r"\d+\.\d s", words.duration(2.5)) and words.duration(None) == "-"


def test_numbers_grouped():
    assert words.grouped(1_234_567) == "1,234,567" and words.grouped(7135.94, 1) == "7,135.9"
    assert words.grouped(None) == "-"
