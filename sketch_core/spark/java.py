"""The Java that Spark starts, found once for everything that depends on which JVM it is."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sketch_core.errors import ConfigurationError


def java_home() -> Path | None:
    """The JDK Spark starts: ``JAVA_HOME`` when it holds a ``bin/java``, else the one the
    ``java`` on PATH belongs to (None: no Java found)."""
    configured = os.environ.get("JAVA_HOME")
    if configured and (Path(configured) / "bin" / "java").exists():
        return Path(configured)
    java = shutil.which("java")
    return Path(java).resolve().parents[1] if java else None


def ensure_java() -> None:
    """Spark needs Java 17+; set JAVA_HOME from the java on PATH if it is unset."""
    home = java_home()
    if home is None:
        raise ConfigurationError(
            "Java was not found; Spark needs Java 17 or newer",
            hint="install it (Debian: apt-get install openjdk-17-jre-headless); `make` does this for you",
        )
    os.environ["JAVA_HOME"] = str(home)
