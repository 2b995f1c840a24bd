"""The JVM libraries Spark needs besides its own: Iceberg's Spark runtime and PostgreSQL's JDBC
driver (the Iceberg catalog lives in the metastore's PostgreSQL).

They come from Maven Central, fetched once with Maven into a folder (``$SKETCH_JARS``, by default
``$SKETCH_HOME/jars``; the bootstrap fills it) and handed to Spark as files. Spark never
resolves packages itself when a session starts: that would need the network at every start and
make a session's start time depend on it.

The pair: Iceberg 1.12.0 is the newest Iceberg release; its newest Spark runtime is for Spark
4.1 (Scala 2.13), so pyspark is pinned to the 4.1 line (pyproject.toml). Spark 4.2 has no
Iceberg runtime yet.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sketch_core.errors import ConfigurationError

ICEBERG_VERSION = "1.12.0"
SPARK_LINE = "4.1"
SCALA_LINE = "2.13"
POSTGRESQL_JDBC_VERSION = "42.7.14"
# Pinned so a fetch does not depend on which plugin version Maven would pick on the day.
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


@dataclass(frozen=True)
class Artifact:
    group: str
    name: str
    version: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.jar"


ARTIFACTS = (
    Artifact("org.apache.iceberg", f"iceberg-spark-runtime-{SPARK_LINE}_{SCALA_LINE}", ICEBERG_VERSION),
    Artifact("org.postgresql", "postgresql", POSTGRESQL_JDBC_VERSION),
)


def default_jars_dir() -> Path:
    """``$SKETCH_JARS``, else ``jars`` under ``$SKETCH_HOME`` (its default as in Settings)."""
    from sketch_core.config import sketch_home

    return Path(os.environ.get("SKETCH_JARS") or sketch_home() / "jars").expanduser().resolve()


def missing_jars(directory: Path) -> list[Artifact]:
    return [a for a in ARTIFACTS if not (directory / a.file_name).is_file()]


def fetch_jars(directory: Path, *, quiet: bool = False) -> list[Path]:
    """Download the missing artifacts into ``directory`` with Maven; returns every jar's path.

    Raises ConfigurationError when Maven is not installed or cannot fetch an artifact.
    """
    directory.mkdir(parents=True, exist_ok=True)
    missing = missing_jars(directory)
    if missing:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ConfigurationError(
                f"Spark needs {', '.join(a.file_name for a in missing)} in {directory}, and Maven "
                "is not installed to fetch them",
                hint="install Maven (Debian: apt-get install maven) and run `sketch jars`, or copy "
                "the jars there yourself (or point SKETCH_JARS at a folder that has them)",
            )
        for artifact in missing:
            if not quiet:
                print(f"fetching {artifact.coordinates} into {directory}", file=sys.stderr)
            done = subprocess.run(
                [
                    mvn,
                    "-q",
                    "-B",
                    f"{_DEPENDENCY_PLUGIN}:copy",
                    f"-Dartifact={artifact.coordinates}",
                    f"-DoutputDirectory={directory}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 or not (directory / artifact.file_name).is_file():
                output = (done.stdout + done.stderr).strip().splitlines()[-15:]
                raise ConfigurationError(
                    f"Maven could not fetch {artifact.coordinates}: " + "\n".join(output),
                    hint="check that Maven Central is reachable (or a mirror in ~/.m2/settings.xml)",
                )
    return [directory / a.file_name for a in ARTIFACTS]


def spark_jars(directory: Path | None = None) -> list[Path]:
    """The jars a session is given, fetched first if any is missing (a fresh machine)."""
    return fetch_jars(directory or default_jars_dir())


def check_pyspark_line() -> None:
    """The Iceberg runtime is built for one Spark line; another one fails in odd ways later."""
    import pyspark

    if not pyspark.__version__.startswith(SPARK_LINE + "."):
        raise ConfigurationError(
            f"pyspark {pyspark.__version__} is installed, but the Iceberg runtime "
            f"{ICEBERG_VERSION} is built for Spark {SPARK_LINE}",
            hint=f"install pyspark {SPARK_LINE}.x (pip install -e . does)",
        )


if __name__ == "__main__":  # the bootstrap: python -m sketch_core.spark.jars [DIR]
    target = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else default_jars_dir()
    try:
        paths = fetch_jars(target)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"JVM libraries ready in {target}: {', '.join(p.name for p in paths)}")
