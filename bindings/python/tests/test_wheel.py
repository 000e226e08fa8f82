"""``pip install ./bindings/python`` builds the Rust library with cargo (setuptools-rust) and
bundles it into a wheel, which installs and runs on its own: in a fresh virtual environment,
from a copy of the wheel outside the checkout, with no ``REDLOCK_LIB`` and no repository in
reach."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import PACKAGE_ROOT


def _run(cmd: list, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    r = subprocess.run(
        cmd, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def test_the_wheel_builds_the_library_and_runs_without_the_checkout(tmp_path, make_cluster):
    # Nothing points at the repository's library: the build must make its own.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDLOCK_LIB", "REDLOCK_NO_BUNDLE", "PYTHONPATH", "LD_LIBRARY_PATH")
    }
    built = tmp_path / "built"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(built), str(PACKAGE_ROOT)],
        tmp_path,
        env,
        timeout=1200,
    )
    wheels = list(built.glob("redlock_quorum-*.whl"))
    assert len(wheels) == 1, wheels
    # A copy elsewhere, installed without an index into a fresh environment.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wheel = Path(shutil.copy(wheels[0], elsewhere))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, timeout=300)
    py = venv / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", "--no-index", str(wheel)], elsewhere, env, 300)
    c = make_cluster(3)
    code = textwrap.dedent(
        f"""
        import redlock
        with redlock.Redlock({c.urls!r}) as m:
            with m.lock("wheel", ttl_ms=10_000) as lk:
                print(lk.granted >= 2, redlock.library_path())
        """
    )
    r = _run([str(py), "-c", code], elsewhere, env, timeout=120)
    held, lib = r.stdout.split()
    assert held == "True", r.stdout
    # The library inside the installed package, built by the wheel's build.
    site = venv.resolve()
    assert Path(lib).resolve().is_relative_to(site), lib
    assert Path(lib).name.startswith("_libredlock"), lib
