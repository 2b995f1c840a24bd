"""A real Airflow deployment for the tests: API server, scheduler, DAG processor and triggerer
as separate processes with the LocalExecutor, on a metadata database of their own on the
private PostgreSQL server, serving the example DAGs from ``dags/``.

Nothing here runs a task itself: the scheduler queues runs, the LocalExecutor's workers run
them through the API server's execution API, deferred sensors wait in the triggerer, exactly
as in a user's deployment. The tests drive it the ways users do: ``airflow dags trigger``,
the REST API (as the UI's Trigger button and the sketches page do), and asset events.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

AIRFLOW = str(Path(sys.executable).parent / "airflow")
REPO = Path(__file__).resolve().parents[2]
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
FINISHED = ("success", "failed")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def deployment_env(
    home: Path, database_url: str, port: int, passwords: Path, connections: Mapping[str, str]
) -> dict[str, str]:
    """The environment of every process of the deployment (and of the CLI commands run
    against it): Airflow's defaults except where a deployment must say (its database, its
    executor, where the API server listens), and a few intervals shortened so the test does
    not wait on them."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    url = f"http://127.0.0.1:{port}"
    return {
        **inherited,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        # Two cores: at most two tasks at once (each may start a Spark driver).
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": database_url.replace("+psycopg", "+psycopg_async"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API_AUTH__JWT_SECRET": "sketch-deployment-test-jwt-secret-" + "1" * 40,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "600",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        **{f"AIRFLOW_CONN_{conn_id.upper()}": value for conn_id, value in connections.items()},
    }


@dataclass
class Deployment:
    home: Path
    env: dict[str, str]
    port: int
    password: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _token: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------------
    def migrate(self) -> None:
        self.cli("db", "migrate", timeout=600)

    def start(self) -> None:
        logs = self.home / "service-logs"
        logs.mkdir(exist_ok=True)
        for service in SERVICES:
            with (logs / f"{service}.log").open("wb") as out:
                self.processes[service] = subprocess.Popen(
                    [AIRFLOW, service],
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        deadline = time.monotonic() + 180
        while True:
            self._check_alive()
            try:
                if httpx.get(f"{self.url}/api/v2/monitor/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not answer:\n{self.service_log('api-server')}")
            time.sleep(1)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for service, process in self.processes.items():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
                print(f"{service} killed after SIGTERM timed out")

    def _check_alive(self) -> None:
        for service, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{service} exited {process.returncode}:\n{self.service_log(service)}")

    def service_log(self, service: str, tail: int = 6000) -> str:
        path = self.home / "service-logs" / f"{service}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    # -- the ways users start and watch runs -------------------------------------------------------
    def cli(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(
            [AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done.stdout

    def token(self) -> str:
        if self._token is None:
            response = httpx.post(
                f"{self.url}/auth/token", json={"username": "admin", "password": self.password}, timeout=30
            )
            response.raise_for_status()
            self._token = str(response.json()["access_token"])
        return self._token

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(
            method,
            f"{self.url}/api/v2{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.token()}"},
            timeout=60,
        )
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:2000]}")
        return response.json() if response.content else None

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 240) -> dict[str, dict[str, Any]]:
        """The DAGs as the API lists them, once the DAG processor has parsed them all."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            listed = {d["dag_id"]: d for d in self.api("GET", "/dags?limit=100")["dags"]}
            if all(d in listed for d in dag_ids):
                return listed
            if time.monotonic() > deadline:
                errors = self.api("GET", "/importErrors")
                raise RuntimeError(f"DAGs not parsed: {sorted(set(dag_ids) - set(listed))}; {errors}")
            time.sleep(2)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.api("GET", f"/dags/{dag_id}/dagRuns?limit=100&order_by=run_after")["dag_runs"])

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 600) -> dict[str, Any]:
        """The run once it finished; fails with its tasks' logs when it did not succeed."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            run = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in FINISHED:
                if run["state"] != "success":
                    raise AssertionError(
                        f"{dag_id} {run_id} ended {run['state']}:\n{self.task_logs(dag_id, run_id)}"
                    )
                return dict(run)
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{dag_id} {run_id} still {run['state']} after {timeout:.0f} s:\n"
                    f"{self.task_logs(dag_id, run_id)}\n{self.service_log('scheduler')}"
                )
            time.sleep(2)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"])

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        entry = self.api(
            "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        )
        value = entry["value"]
        return json.loads(value) if isinstance(value, str) else value

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        body = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}?full_content=true",
        )
        content = body.get("content", body)
        if isinstance(content, list):
            return "\n".join(json.dumps(line) if not isinstance(line, str) else line for line in content)
        return str(content)

    def task_logs(self, dag_id: str, run_id: str) -> str:
        parts = []
        for ti in self.task_instances(dag_id, run_id):
            parts.append(f"--- {ti['task_id']}: {ti['state']}")
            if ti.get("try_number"):
                try:
                    parts.append(self.task_log(dag_id, run_id, ti["task_id"], ti["try_number"])[-4000:])
                except RuntimeError as exc:
                    parts.append(str(exc))
        return "\n".join(parts)
