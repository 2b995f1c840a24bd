"""A built wheel carries the metastore's schema: built from the checkout, unpacked, and imported
from there (not from the checkout), it migrates an empty database to the current version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from sqlalchemy import Engine

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


def project_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored) copied to ``target``: a build
    there leaves nothing in the checkout (setuptools' ``build/`` would outlive moved modules)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def test_a_built_wheel_migrates_an_empty_database(tmp_path: Path, fresh_engine: Engine) -> None:
    source = project_copy(tmp_path / "source")
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
