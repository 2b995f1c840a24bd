"""The sketches page: one row per sketch, rendered from ``svc.status()`` (pure: no I/O).

Everything shown is escaped; the buttons post to Airflow's REST API (the browser's Airflow
session authenticates them) to trigger the ``sketch_admin`` DAG for that sketch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Literal

from sketch_airflow.ui.chart import Point, scatter
from sketch_core.metastore.state_modes import describe_state_mode
from sketch_core.status import SketchStatus

ADMIN_DAG = "sketch_admin"
# Whether the DAG the buttons trigger is deployed, and whether the scheduler runs its runs.
AdminDag = Literal["active", "paused", "missing"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px; color: #222; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 6px 8px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.fresh { color: #2e7d32; } .stale { color: #c62828; }
.reason { color: #555; font-size: 12px; }
.blocked { color: #c62828; font-size: 12px; }
button { margin: 2px; padding: 3px 8px; cursor: pointer; }
#message { margin: 8px 0; min-height: 1.2em; }
.chart { max-width: 640px; font-size: 10px; }
.notice { background: #fff4e5; border: 1px solid #f0b860; padding: 8px 12px; margin: 8px 0; }
"""

_SCRIPT = """
const ADMIN_DAG = __ADMIN_DAG__;
async function trigger(name, action, strategy) {
  const message = document.getElementById("message");
  message.textContent = `triggering ${action} of ${name}...`;
  const response = await fetch(`/api/v2/dags/${ADMIN_DAG}/dagRuns`, {
    method: "POST",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({logical_date: null, conf: {action: action, name: name, strategy: strategy}}),
  });
  const body = await response.json().catch(() => ({}));
  message.textContent = response.ok
    ? `started ${body.dag_run_id} (${action} ${name})`
    : `could not trigger ${ADMIN_DAG}: ${response.status} ${body.detail ? JSON.stringify(body.detail) : ""}`;
  message.dataset.status = response.ok ? "ok" : "error";
}
async function unpause() {
  const message = document.getElementById("message");
  const response = await fetch(`/api/v2/dags/${ADMIN_DAG}`, {
    method: "PATCH",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({is_paused: false}),
  });
  if (response.ok) { window.location.reload(); return; }
  const body = await response.json().catch(() => ({}));
  const detail = body.detail ? JSON.stringify(body.detail) : "";
  message.textContent = `could not unpause ${ADMIN_DAG}: ${response.status} ${detail}`;
  message.dataset.status = "error";
}
document.addEventListener("click", (event) => {
  if (event.target.closest("button#unpause")) { unpause(); return; }
  const button = event.target.closest("button[data-action]");
  if (button) trigger(button.dataset.sketch, button.dataset.action, button.dataset.strategy || "auto");
});
"""


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def _admin_notice(admin: AdminDag) -> str:
    """What the user must do before the buttons do anything, when the admin DAG cannot run."""
    link = f'<a href="/dags/{ADMIN_DAG}">{ADMIN_DAG}</a>'
    if admin == "paused":
        return (
            f'<div class="notice" id="admin-paused">The buttons start runs of {link}, which is paused: '
            "its runs would wait until it is unpaused. "
            f'<button id="unpause">Unpause {ADMIN_DAG}</button></div>'
        )
    if admin == "missing":
        return (
            f'<div class="notice" id="admin-missing">The buttons start runs of the {ADMIN_DAG} DAG, which '
            "this Airflow does not have: copy <code>dags/sketch_admin.py</code> of the project into "
            "the DAGs folder.</div>"
        )
    return ""


def _row(s: SketchStatus, admin: AdminDag = "active") -> str:
    state = "fresh" if s.fresh else "stale"
    snapshots = "<br>".join(f"{escape(t)}: {sid}" for t, sid in sorted(s.table_snapshots.items())) or "-"
    sizes = "<br>".join(
        f"{escape(t.table)}.{escape(t.attribute)}: {t.fragments:,}/{t.fragment_count:,} ({t.selectivity:.1%})"
        for t in s.tables
    )
    run = s.last_run
    last = (
        f"{escape(run.strategy)} {escape(run.status)}, {run.seconds or 0:.2f} s<br>{_when(run.finished_at)}"
        if run
        else "-"
    )
    chosen = s.cost_decision
    if chosen is not None:
        last += (
            f'<div class="reason">chose {escape(chosen.action)} ({escape(chosen.context)}) at '
            f"{_when(chosen.decided_at)}: {escape(chosen.reason)}</div>"
        )
    if s.state_mode is not None:
        last += f'<div class="reason">state {escape(describe_state_mode(s.state_mode))}</div>'
    if s.blocked is not None:
        last += f'<div class="blocked"><b>blocked</b>: {escape(s.blocked)}</div>'

    policy = escape(s.policy) + ("" if s.policy_explicit else " <i>(default)</i>")
    decision = s.last_decision
    verdict = (
        f'<div class="reason">{"fired" if decision.fired else "waits"} at {_when(decision.decided_at)}: '
        f"{escape(decision.reason)}</div>"
        if decision
        else '<div class="reason">not checked yet</div>'
    )
    name = escape(s.name, quote=True)
    disabled = " disabled" if admin == "missing" else ""
    buttons = "".join(
        f'<button data-sketch="{name}" data-action="{action}" data-strategy="{strategy}"{disabled}>'
        f"{label}</button>"
        for label, action, strategy in (
            ("Maintain", "maintain", "auto"),
            ("Recapture", "maintain", "full"),
            ("Drop", "drop", "auto"),
        )
    )
    return (
        f'<tr data-sketch="{name}"><td><b>{escape(s.name)}</b></td>'
        f'<td class="num version">{s.version if s.version is not None else "-"}</td>'
        f"<td>{snapshots}</td>"
        f'<td class="num {state} behind">{s.commits_behind}</td>'
        f'<td class="num {state} pending">{s.delta_rows_pending:,}</td>'
        f"<td>{sizes or '-'}</td><td>{last}</td><td>{policy}{verdict}</td><td>{buttons}</td></tr>"
    )


def render_page(
    statuses: Sequence[SketchStatus], points: Sequence[Point], user: str, admin: AdminDag = "active"
) -> str:
    rows = "".join(_row(s, admin) for s in statuses) or '<tr><td colspan="9">No sketches yet.</td></tr>'
    script = _SCRIPT.replace("__ADMIN_DAG__", json.dumps(ADMIN_DAG))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Sketches</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h2>Provenance sketches</h2><p>Signed in as {escape(user)}. "
        f"{len(statuses)} sketch{'' if len(statuses) == 1 else 'es'}.</p>"
        f'{_admin_notice(admin)}<div id="message"></div>'
        "<table><thead><tr><th>sketch</th><th>version</th><th>table snapshots</th><th>commits behind</th>"
        "<th>delta rows pending</th><th>fragments kept (selectivity)</th><th>last maintenance</th>"
        "<th>policy and last decision</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        f"<h3>Maintenance time against delta size</h3>{scatter(points)}"
        f"<script>{script}</script></body></html>"
    )
