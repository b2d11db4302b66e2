"""The chart's Grafana dashboard (charts/cowork-gym/dashboards/cowork-gym.json) against the
operator's metrics (no cluster, no Grafana): every query reads series the operator exports,
with labels those series carry, is PromQL promtool accepts, and the panels the chart
promises are there. The ConfigMap the chart renders from it, and the alerts' links to it:
tests/testbed/test_chart_dashboard.py."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import coworkgym_operator
from coworkgym.loop.machine import Phase
from coworkgym_operator.campaign.metrics import STATES as CAMPAIGN_STATES
from coworkgym_operator.core.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cowork-gym"
DASHBOARD = CHART / "dashboards" / "cowork-gym.json"
# The alerts link here (templates/prometheusrule.yaml reads the uid from the file): a new
# uid breaks every link people saved and every alert's dashboard_url.
UID = "cowork-gym"
# Series Prometheus makes itself, not the operator: the scrape's health (CoworkGymOperatorDown
# reads it too).
PROMETHEUS_SERIES = {"up": {"job", "instance", "namespace"}}
# What Grafana replaces before a query reaches Prometheus, as promtool should see it.
GRAFANA_MACROS = {
    "$__rate_interval": "2m",
    "$__range": "6h",
    "$__interval": "1m",
}
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or"}
PROMQL_WORDS |= {"unless", "bool", "offset", "inf", "nan"}
LABEL_LISTS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


# ---- what the operator exports -----------------------------------------------------------


def exported_series() -> dict[str, set[str]]:
    """Series name → its label names, for every metric on the operator's registry, as
    /metrics exposes them (a counter's _total, a histogram's _bucket with le, _sum, _count).
    Every kind's metrics module (and the core's) is imported first, so each registers its
    metrics, and a metric renamed there fails the tests below."""
    prefix = f"{coworkgym_operator.__name__}."
    for module in pkgutil.walk_packages(coworkgym_operator.__path__, prefix):
        if module.name.endswith(".metrics"):
            importlib.import_module(module.name)
    series: dict[str, set[str]] = {}
    for collector in set(REGISTRY._names_to_collectors.values()):
        labels = set(getattr(collector, "_labelnames", ()))
        for family in collector.describe():
            if family.type == "counter":
                series[f"{family.name}_total"] = labels
            elif family.type == "histogram":
                series[f"{family.name}_bucket"] = labels | {"le"}
                series[f"{family.name}_sum"] = labels
                series[f"{family.name}_count"] = labels
            else:
                series[family.name] = labels
    return series


EXPORTED = exported_series()


# ---- the dashboard's queries -------------------------------------------------------------


def load_dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(where, PromQL, legend) of every panel target and every query variable."""
    found = [
        (f"panel {p['id']} {p['title']!r} {t['refId']}", t["expr"], t.get("legendFormat", ""))
        for p in all_panels(dashboard)
        for t in p.get("targets", [])
    ]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            assert var["query"] == var["definition"], var["name"]  # what runs, what shows
            values = re.fullmatch(rf"label_values\((.+),\s*({NAME})\)", var["query"])
            assert values, f"variable {var['name']}: not label_values(<selector>, <label>)"
            found.append((f"variable {var['name']}", values.group(1), ""))
    return found


def grafana_expanded(expr: str) -> str:
    """The query as Grafana sends it: macros replaced, each variable at its "All" value."""
    for macro, value in GRAFANA_MACROS.items():
        expr = expr.replace(macro, value)
    return re.sub(r"\$\{?(\w+)\}?", ".*", expr)


def without_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def series_names(expr: str) -> set[str]:
    """The series a PromQL expression selects: its names that are neither functions,
    aggregations, keywords nor label names."""
    bare = LABEL_LISTS.sub(" ", re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", without_strings(expr)))
    names = re.findall(rf"(?<![\w.$:]){NAME}(?![\w:]|\s*\()", bare)
    return {n for n in names if n.lower() not in PROMQL_WORDS}


def matched_labels(expr: str) -> list[tuple[str, str]]:
    """(series, label) of each label matcher written in a selector's braces."""
    pairs = []
    for name, matchers in re.findall(rf"({NAME})\s*\{{([^}}]*)\}}", without_strings(expr)):
        pairs += [(name, label) for label in re.findall(rf"({NAME})\s*(?:=~|!~|!=|=)", matchers)]
    return pairs


def grouping_labels(expr: str) -> set[str]:
    return {
        label.strip()
        for _, labels in LABEL_LISTS.findall(without_strings(expr))
        for label in labels.split(",")
        if label.strip()
    }


KNOWN = EXPORTED | PROMETHEUS_SERIES
QUERIES = queries(load_dashboard())
IDS = [where for where, _, _ in QUERIES]


@pytest.mark.parametrize(("where", "expr", "legend"), QUERIES, ids=IDS)
def test_every_query_reads_series_the_operator_exports(where: str, expr: str, legend: str) -> None:
    names = series_names(expr)
    assert names, f"{where}: no series found in {expr}"
    assert names <= set(KNOWN), f"{where}: {names - set(KNOWN)} are not exported"


@pytest.mark.parametrize(("where", "expr", "legend"), QUERIES, ids=IDS)
def test_every_label_a_query_names_is_on_its_series(where: str, expr: str, legend: str) -> None:
    for name, label in matched_labels(expr):
        assert label in KNOWN[name], f"{where}: {name} has no label {label}"
    carried = set().union(*(KNOWN[n] for n in series_names(expr)))
    grouped = grouping_labels(expr)
    assert grouped <= carried, f"{where}: no series of it has {grouped - carried}"
    # A legend can only show labels the result keeps: those grouped by, when it aggregates.
    shown = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    assert shown <= (grouped or carried), f"{where}: the legend shows {shown - grouped}"


def test_the_checks_above_catch_a_renamed_metric_or_label() -> None:
    renamed = "sum by (stage) (rate(coworkgym_stage_seconds_bucket[5m]))"
    assert series_names(renamed) == {"coworkgym_stage_seconds_bucket"} - set(KNOWN)
    assert matched_labels('coworkgym_defects_total{kind="x", code=~"a"}') == [
        ("coworkgym_defects_total", "kind"),
        ("coworkgym_defects_total", "code"),
    ]
    assert "kind" not in KNOWN["coworkgym_defects_total"]
    assert grouping_labels("sum by (code, owner) (x) / on () group_left sum(y)") == {
        "code",
        "owner",
    }
    # Label values, label lists, ranges, numbers and functions are not series.
    assert series_names(
        'histogram_quantile(0.95, sum by (le) (rate(a_bucket{x="b c"}[5m]))) * 3600 > bool 1e3'
    ) == {"a_bucket"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_every_query_is_promql_that_promtool_accepts(tmp_path: Path) -> None:
    """Each query, as Grafana sends it, becomes a recording rule: `promtool check rules`
    parses every expression with Prometheus's own parser."""
    rules = [
        {"record": f"dashboard:query_{i}", "expr": grafana_expanded(expr)}
        for i, (_, expr, _) in enumerate(QUERIES)
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    cp = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"SUCCESS: {len(rules)} rules found" in cp.stdout
    # ... and promtool does refuse what is not PromQL.
    path.write_text(
        yaml.safe_dump(
            {"groups": [{"name": "bad", "rules": [{"record": "x:y", "expr": "sum by (le (x)"}]}]}
        )
    )
    cp = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert cp.returncode != 0


# ---- the dashboard itself ----------------------------------------------------------------


def test_the_dashboard_keeps_its_uid_and_takes_the_datasource_and_namespace() -> None:
    dashboard = load_dashboard()
    assert dashboard["uid"] == UID
    assert dashboard["id"] is None  # a provisioned dashboard gets its id from Grafana
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["namespace"]["multi"] and variables["namespace"]["includeAll"]
    # "All" is a regex over every namespace, so every selector matches with =~.
    assert variables["namespace"]["allValue"] == ".*"
    for panel in all_panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["id"]
        for t in panel["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", panel["id"]


@pytest.mark.parametrize(
    ("where", "expr", "legend"),
    [q for q in QUERIES if q[0].startswith("panel")],  # the namespace variable lists them all
    ids=[where for where in IDS if where.startswith("panel")],
)
def test_every_series_with_a_namespace_is_narrowed_to_the_chosen_ones(
    where: str, expr: str, legend: str
) -> None:
    """The operator labels a series with the namespace of the object it counts. A query
    over a series with none of its own (API calls, the scrape's up) is operator-wide: what
    it divides by is too."""
    names = series_names(expr)
    if any("namespace" not in EXPORTED.get(name, set()) for name in names):
        return
    for name in names:
        if "namespace" in EXPORTED[name]:
            chosen = rf'\b{name}\{{[^}}]*\bnamespace=~"\$namespace"'
            assert re.search(chosen, expr), f"{where}: {name} is not narrowed to $namespace"


def test_panel_ids_are_unique_and_panels_do_not_overlap() -> None:
    panels = list(all_panels(load_dashboard()))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], int] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["id"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panels {cells[(x, y)]} and {p['id']} overlap"
                cells[(x, y)] = p["id"]
    for p in panels:
        refs = [t["refId"] for t in p.get("targets", [])]
        assert len(refs) == len(set(refs)), p["id"]


def panel(title: str) -> dict[str, Any]:
    (found,) = [p for p in all_panels(load_dashboard()) if p["title"] == title]
    return found


def test_the_dashboard_has_the_panels_the_chart_promises() -> None:
    titles = {p["title"] for p in all_panels(load_dashboard())}
    assert {
        "Synthesis funnel over the time range",
        "Environments by phase now",
        "In-flight environments by phase",
        "Defects per hour by code",
        "Defects per hour by owner",
        "Defects per verdict, by code",
        "Defects by code and owner over the time range",
        "Share not released, and revise budget used up",
        "Stage duration p50",
        "Stage duration p95",
        "Iterations per verdict",
        "Campaign funnel now",
        "Campaign failure ratio against its threshold",
        "Rollouts per minute by outcome",
        "Invalid and user-simulator-fault share per policy",
        "Loss",
        "Optimizer steps",
        "Failed runs",
        "Reconcile error share by kind",
        "API calls per phase change",
    } <= titles


def test_the_funnel_follows_the_loop_stages_to_the_release() -> None:
    exprs = [t["expr"] for t in panel("Synthesis funnel over the time range")["targets"]]
    stages = [re.search(r'stage="(\w+)"', e) for e in exprs]
    assert [s.group(1) for s in stages if s] == ["builder", "verifier", "detector", "release"]
    assert "coworkgym_environments_created_total" in exprs[0]
    assert 'outcome="released"' in exprs[-1]


def test_the_phase_panel_has_every_phase_of_the_loop_in_order() -> None:
    targets = panel("Environments by phase now")["targets"]
    assert [t["legendFormat"] for t in targets] == [p.value for p in Phase]
    # and the in-flight panels leave out exactly the terminal phases
    terminal = {p.value for p in Phase if p.is_terminal()}
    inflight = panel("In-flight environments by phase")["targets"][0]["expr"]
    excluded = re.search(r'phase!~"([^"]+)"', inflight)
    assert excluded and set(excluded.group(1).split("|")) == terminal


def test_the_campaign_funnel_has_every_state_the_operator_counts() -> None:
    targets = panel("Campaign funnel now")["targets"]
    assert [t["legendFormat"] for t in targets] == list(CAMPAIGN_STATES)


def test_the_docs_give_the_link_the_alerts_carry() -> None:
    # templates/prometheusrule.yaml builds <grafana.url>/d/<uid>, the uid read from the file
    for doc in (CHART / "values.yaml", ROOT / "docs" / "deploy.md"):
        assert f"/d/{UID}?var-namespace=" in " ".join(doc.read_text().split()), doc.name


# ---- what the synthesis panels compute ---------------------------------------------------

ENV_LABELS = 'namespace="gym", family="weather_report"'
# An hour of an operator's series (one sample a minute from 0), in namespace gym and in
# another namespace the panels must leave out (the dashboard's namespace is gym).
SCENARIO = {
    **{
        f'coworkgym_stage_duration_seconds_count{{{ENV_LABELS}, stage="{stage}"}}': per_minute
        for stage, per_minute in (("builder", 5), ("verifier", 4), ("detector", 4), ("release", 2))
    },
    f"coworkgym_environments_created_total{{{ENV_LABELS}}}": 6,
    **{
        f'coworkgym_environments_finished_total{{{ENV_LABELS}, outcome="{outcome}"}}': per_minute
        for outcome, per_minute in (("released", 2), ("rejected", 1), ("failed", 1))
    },
    'coworkgym_environments_finished_total{namespace="other", outcome="released"}': 100,
    f"coworkgym_iterations_sum{{{ENV_LABELS}}}": 6,
    f"coworkgym_iterations_count{{{ENV_LABELS}}}": 4,
    f'coworkgym_defects_total{{{ENV_LABELS}, code="missing_file", owner="builder"}}': 3,
    f'coworkgym_defects_total{{{ENV_LABELS}, code="wrong_total", owner="verifier"}}': 1,
}
GAUGES = {
    f'coworkgym_environments{{{ENV_LABELS}, phase="Building"}}': 3,
    f'coworkgym_environments{{{ENV_LABELS}, phase="Executing"}}': 2,
    f'coworkgym_environments{{{ENV_LABELS}, phase="Released"}}': 7,
    'coworkgym_environments{namespace="other", family="weather_report", phase="Building"}': 50,
    **{
        f'coworkgym_campaign_environments{{namespace="gym", campaign="c", state="{state}"}}': n
        for state, n in zip(CAMPAIGN_STATES, (30, 12, 5, 6, 1, 0), strict=True)
    },
}
# Over the hour: 360 environments created; 300 builder Jobs, 240 verifier, 240 detector, 120
# release; 240 verdicts (120 released); 360 iterations; 180 + 60 defects.
EXPECTED: dict[str, list[list[tuple[str, float]]]] = {
    "Synthesis funnel over the time range": [
        [("{}", 360)],
        [("{}", 300)],
        [("{}", 240)],
        [("{}", 240)],
        [("{}", 120)],
        [("{}", 120)],
    ],
    "Not released": [[("{}", 0.5)]],
    "Released": [[("{}", 120)]],
    "Mean iterations per verdict": [[("{}", 1.5)]],
    "In flight now": [[("{}", 5)]],
    "Environments by phase now": [
        [("{}", {"Building": 3, "Executing": 2, "Released": 7}[p.value])]
        if p.value in ("Building", "Executing", "Released")
        else []
        for p in Phase
    ],
    "Defects per verdict, by code": [
        [('{code="missing_file"}', 180 / 240), ('{code="wrong_total"}', 60 / 240)]
    ],
    "Share not released, and revise budget used up": [[('{namespace="gym"}', 0.5)], []],
    "Campaign funnel now": [[("{}", n)] for n in (30, 12, 5, 6, 1)] + [[("{}", 0)]],
}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_the_synthesis_panels_compute_what_they_say(tmp_path: Path) -> None:
    """promtool evaluates the panels' queries over an hour of series, as Grafana sends them
    with the range an hour and the namespace gym."""
    checks = []
    for title, per_target in EXPECTED.items():
        targets = panel(title)["targets"]
        assert len(targets) == len(per_target), title
        for t, samples in zip(targets, per_target, strict=True):
            expr = t["expr"].replace("$__range", "1h").replace("$namespace", "gym")
            checks.append(
                {
                    "expr": grafana_expanded(expr),
                    "eval_time": "60m",
                    "exp_samples": [{"labels": labels, "value": v} for labels, v in samples],
                }
            )
    series = [{"series": s, "values": f"0+{n}x60"} for s, n in SCENARIO.items()]
    series += [{"series": s, "values": f"{n}x60"} for s, n in GAUGES.items()]
    path = tmp_path / "dashboard-test.yaml"
    test = {"interval": "1m", "input_series": series, "promql_expr_test": checks}
    path.write_text(yaml.safe_dump({"rule_files": [], "tests": [test]}))
    cp = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
