"""Check that pyproject.toml's lower bounds are true: install the project with the lowest
version of each direct dependency that the bounds allow, then import every module and run the
tests that need no metastore (the SQL front end on Spark and TPC-H, the analyses, the rewrites,
the cost models and policies, the recursive engines) on those versions.

A bound lies in two ways, and both fail the check:
- the lowest versions do not install together, or another dependency raises one of them (then
  the installed version is above the bound: raise the bound to it);
- they install, but the code does not work with them (an import or a test fails).

    .venv/bin/python scripts/check_lowest_versions.py      # (``make check-lowest``)

uv resolves with ``--resolution lowest-direct``; the environment is kept in
``$SKETCH_HOME/lowest-venv`` (default ``.cache/``) and refreshed on every run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/algebra",
    "tests/analysis",
    "tests/rewrites",
    "tests/costs",
    "tests/policy",
    "tests/recursive",
]
# The main suite runs these; here they would add minutes of the same Spark jobs. The lowest
# versions still read every TPC-H text (the schema-free check), every recursive text, and run
# the rest of tests/recursive's Spark tests (Arrow results at pyarrow's lowest version).
DESELECTED = [
    "tests/recursive/test_service.py::test_maintained_recursive_sketches_equal_fresh_captures_and_keep_reports_exact",
    "tests/algebra/test_tpch_roundtrip.py::test_printed_ir_returns_the_same_rows",
]

IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
import sketch_airflow, sketch_core
names = [m.name for package in (sketch_core, sketch_airflow)
         for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
failed = []
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"  {name}: {type(exc).__name__}: {exc}")
print(f"{len(names) - len(failed)} of {len(names)} modules import from {sketch_core.__file__}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def lower_bounds(dependencies: list[str]) -> dict[str, Version]:
    """Each direct dependency's lowest allowed version (those without one are left out)."""
    bounds = {}
    for line in dependencies:
        requirement = Requirement(line)
        lows = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if lows:
            bounds[canonicalize_name(requirement.name)] = max(lows)
    return bounds


def raised_bounds(bounds: dict[str, Version], installed: dict[str, Version]) -> list[str]:
    """The dependencies installed above their lower bound: the bound cannot be installed."""
    return [
        f"  {name}: pyproject.toml allows {bound}, but the lowest that installs with the rest is "
        f"{installed[name]}: raise the bound"
        for name, bound in sorted(bounds.items())
        if name in installed and installed[name] != bound
    ]


def checkout_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored) in ``target``: a build there
    leaves no ``build/`` in the checkout, whose stale modules would reach later builds."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.exists() or source.is_symlink():  # not deleted in the working tree
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def _installed(python: Path, uv: Path) -> dict[str, Version]:
    listed = subprocess.run(
        [str(uv), "pip", "freeze", "--python", str(python)], check=True, capture_output=True, text=True
    ).stdout
    found = {}
    for line in listed.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if match:
            found[canonicalize_name(match[1])] = Version(match[2])
    return found


def main() -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = lower_bounds(project["dependencies"])
    uv = Path(sys.executable).with_name("uv")
    venv = Path(os.environ.get("SKETCH_HOME") or ROOT / ".cache") / "lowest-venv"
    python = venv / "bin" / "python"
    subprocess.run(
        [str(uv), "venv", "--quiet", "--allow-existing", "--python", sys.executable, str(venv)], check=True
    )
    print(f"installing the project with the lowest allowed dependencies into {venv}", flush=True)
    install = [str(uv), "pip", "install", "--quiet", "--python", str(python), "--resolution", "lowest-direct"]
    with tempfile.TemporaryDirectory() as scratch:
        source = checkout_copy(Path(scratch))
        installed = subprocess.run([*install, "--reinstall-package", "sketch-skipping", str(source)])
    if installed.returncode != 0:
        print("error: the lowest allowed versions do not install together (see above)", file=sys.stderr)
        return 1
    raised = raised_bounds(bounds, _installed(python, uv))
    if raised:
        print("error: lower bounds that cannot be installed:\n" + "\n".join(raised), file=sys.stderr)
        return 1
    print("every direct dependency installed at its lower bound", flush=True)
    # Imported from the installed package, not the checkout: run outside it.
    if subprocess.run([str(python), "-c", IMPORT_EVERY_MODULE], cwd=venv).returncode != 0:
        print("error: modules fail to import with the lowest allowed dependencies", file=sys.stderr)
        return 1
    tools = [
        str(uv),
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        "pytest",
        "pytest-timeout",
        "hypothesis",
    ]
    subprocess.run(tools, check=True)
    deselected = [f"--deselect={test}" for test in DESELECTED]
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *deselected, *TESTS], cwd=ROOT
    )
    if tests.returncode != 0:
        print("error: tests fail with the lowest allowed dependencies", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
