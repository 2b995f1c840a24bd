"""Spark jobs run by spark-submit: ``python -m sketch_core.jobs capture|maintain ...``.

The job reads the metastore and warehouse from ``SKETCH_METASTORE_URL`` and
``SKETCH_WAREHOUSE`` (spark-submit's environment) and uses the Spark session spark-submit
started, on whatever master it was given. Its last line of output is ``SKETCH_RESULT {json}``:
what it published.
"""

from sketch_core.jobs.run import RESULT_PREFIX, main, parse_result

__all__ = ["RESULT_PREFIX", "main", "parse_result"]
