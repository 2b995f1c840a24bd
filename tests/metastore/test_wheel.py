"""A built wheel carries the metastore's schema: built from the checkout, unpacked, and imported
from there (not from the checkout), it migrates an empty database to the current version."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from sqlalchemy import Engine

from scripts.check_lowest_versions import checkout_copy
from sketch_core.metastore.migrations import current_version, discover

ROOT = Path(__file__).resolve().parents[2]

MIGRATE_FROM_WHEEL = """
import json, sys
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import default_migrations_dir, migrate
import sketch_core
engine = connect_metastore(sys.argv[1])
report = migrate(engine)
engine.dispose()
print(json.dumps({"package": sketch_core.__file__, "migrations": str(default_migrations_dir()),
                  "applied": report.applied}))
"""


def test_a_built_wheel_migrates_an_empty_database(tmp_path: Path, fresh_engine: Engine) -> None:
    source = checkout_copy(tmp_path / "source")  # no build/ left in the checkout
    dist = tmp_path / "dist"
    # Build isolation: pip fetches the build backend pyproject.toml names, as any build would.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(source)],
        check=True,
        cwd=tmp_path,
        timeout=600,
    )
    (wheel,) = dist.glob("sketch_skipping-*.whl")
    shipped = sorted(
        Path(n).name for n in zipfile.ZipFile(wheel).namelist() if n.startswith("sketch_core/metastore/sql/")
    )
    assert shipped == sorted(path.name for path in (ROOT / "sql").glob("*.sql"))

    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked)
    url = fresh_engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "-c", MIGRATE_FROM_WHEEL, url],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(outcome["package"]).is_relative_to(unpacked), "imported from the wheel"
    assert Path(outcome["migrations"]).is_relative_to(unpacked)
    expected = [m.version for m in discover(ROOT / "sql")]
    assert outcome["applied"] == expected
    assert current_version(fresh_engine) == expected[-1]
