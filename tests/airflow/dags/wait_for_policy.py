"""Test DAG: the policy sensor, deferred, for the sketch named in the run's conf."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG
from sketch_airflow.sensors.policy import SketchPolicySensor

with DAG("wait_for_policy", start_date=pendulum.datetime(2026, 1, 1), schedule=None, params={"name": ""}):
    SketchPolicySensor(task_id="wait", names=["{{ params.name }}"], poke_interval=0.2, timeout=120)
