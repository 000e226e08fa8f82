"""Where the shared library is found, in order, and the one clear error when it is not; and the
build hook that bundles a copy into the package (what `pip install` runs)."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import redlock
from redlock import _ffi

from conftest import PACKAGE_ROOT, REPO_ROOT

LIB = _ffi.LIB_FILENAME


def _loaded_library() -> str:
    """The library this test run uses (REDLOCK_LIB or the repository's build)."""
    return os.path.realpath(redlock.library_path())


def _clean_env(**extra: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDLOCK_LIB", "PYTHONPATH", "LD_LIBRARY_PATH")
    }
    env.update(extra)
    return env


def _python(code: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _copy_package(dest: Path) -> Path:
    """The package's Python files alone, outside the repository (no library, no target/).
    Returns the directory to put on PYTHONPATH; make ``dest`` end in ``bindings/python`` to
    mirror a checkout (its ``../..`` is then searched for ``target/``)."""
    pkg = dest / "redlock"
    pkg.mkdir(parents=True)
    for f in Path(PACKAGE_ROOT, "redlock").iterdir():
        if f.suffix in (".py", ".typed"):
            shutil.copy(f, pkg / f.name)
    return dest


PROBE = """
    import redlock
    try:
        print("LOADED", redlock.library_path())
    except redlock.LibraryNotFoundError as e:
        print("MISSING")
        print(e)
"""


def test_library_is_loaded_from_the_expected_place():
    env = os.environ.get("REDLOCK_LIB")
    if env:
        assert redlock.library_path() == env
    else:
        assert _loaded_library() == os.path.realpath(
            os.path.join(REPO_ROOT, "target", "release", LIB)
        )


def test_repository_build_is_found_without_redlock_lib(tmp_path):
    release = Path(REPO_ROOT, "target", "release", LIB)
    assert release.is_file(), "run `cargo build --release` first"
    r = _python(PROBE, tmp_path, _clean_env(PYTHONPATH=PACKAGE_ROOT))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["LOADED", str(release)]


def test_redlock_lib_wins_and_a_bad_one_is_one_clear_error(tmp_path):
    r = _python(PROBE, tmp_path, _clean_env(PYTHONPATH=PACKAGE_ROOT, REDLOCK_LIB=_loaded_library()))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["LOADED", _loaded_library()]

    missing = str(tmp_path / "nowhere" / LIB)
    r = _python(PROBE, tmp_path, _clean_env(PYTHONPATH=PACKAGE_ROOT, REDLOCK_LIB=missing))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("MISSING")
    assert f"REDLOCK_LIB={missing!r}" in r.stdout
    # It does not silently fall back to another library.
    assert "LOADED" not in r.stdout

    not_a_lib = tmp_path / "fake.so"
    not_a_lib.write_text("not an ELF file")
    r = _python(PROBE, tmp_path, _clean_env(PYTHONPATH=PACKAGE_ROOT, REDLOCK_LIB=str(not_a_lib)))
    assert r.stdout.startswith("MISSING") and str(not_a_lib) in r.stdout


def test_a_library_of_another_kind_is_refused(tmp_path):
    libc = ctypes.util.find_library("c")
    assert libc
    r = _python(PROBE, tmp_path, _clean_env(PYTHONPATH=PACKAGE_ROOT, REDLOCK_LIB=libc))
    assert r.stdout.startswith("MISSING")
    assert "does not export redlock_" in r.stdout


def test_missing_library_error_lists_every_place(tmp_path):
    root = _copy_package(tmp_path / "bindings" / "python")
    code = (
        PROBE
        + """
    import redlock
    try:
        redlock.Redlock(["127.0.0.1:1"])
    except redlock.LibraryNotFoundError as e:
        print("RAISED", isinstance(e, OSError))
"""
    )
    r = _python(code, tmp_path, _clean_env(PYTHONPATH=str(root)))
    assert r.returncode == 0, r.stderr  # importing works without the library
    if r.stdout.startswith("LOADED"):
        # A libredlock installed system-wide (e.g. `make -C bindings/c install`): the last
        # place searched. Then it must not be one of the earlier places.
        path = r.stdout.split()[1]
        assert str(tmp_path) not in path and REPO_ROOT not in path
        return
    out = r.stdout
    lines = out.splitlines()
    assert lines[0] == "MISSING"
    assert "cargo build --release" in out and "REDLOCK_LIB" in out
    expected_order = [
        "REDLOCK_LIB: not set",
        str(root / "redlock" / LIB),
        str(tmp_path / "target" / "release" / LIB),
        str(tmp_path / "target" / "debug" / LIB),
        "system library search",
    ]
    positions = [out.find(s) for s in expected_order]
    assert all(p >= 0 for p in positions), (expected_order, out)
    assert positions == sorted(positions), out
    assert "RAISED True" in out


def test_search_order_package_copy_then_release_then_debug(tmp_path):
    root = _copy_package(tmp_path / "bindings" / "python")
    env = _clean_env(PYTHONPATH=str(root))
    places = [
        root / "redlock" / LIB,
        tmp_path / "target" / "release" / LIB,
        tmp_path / "target" / "debug" / LIB,
    ]
    for p in places:
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(_loaded_library(), p)
    # Each place wins over the ones after it; remove the winner and the next one is used.
    for p in places:
        r = _python(PROBE, tmp_path, env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["LOADED", str(p)]
        p.unlink()


def test_build_hook_bundles_the_library_and_py_typed(tmp_path):
    """What `pip install ./bindings/python` runs (setup.py's build_py), on a copy of the
    project, so the source tree is left untouched and parallel runs do not collide."""
    src = tmp_path / "src"
    shutil.copytree(
        PACKAGE_ROOT,
        src,
        ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__", "*.so"),
    )
    out = tmp_path / "out"
    env = _clean_env(REDLOCK_LIB=_loaded_library())
    r = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],
        cwd=str(src),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(p.name for p in (out / "redlock").iterdir())
    for want in ("__init__.py", "_core.py", "_errors.py", "_ffi.py", "py.typed", LIB):
        assert want in files, files
    # The installed layout finds its own copy first, from anywhere.
    r = _python(PROBE, tmp_path, _clean_env(PYTHONPATH=str(out)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["LOADED", str(out / "redlock" / LIB)]

    # Without a library to bundle the build fails, saying where it looked ...
    r = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "o2")],
        cwd=str(src),
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0 and "cargo build --release" in r.stderr + r.stdout
    # ... unless told to install without a copy.
    r = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "o3")],
        cwd=str(src),
        env=_clean_env(REDLOCK_NO_BUNDLE="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "o3" / "redlock" / LIB).exists()
    assert (tmp_path / "o3" / "redlock" / "py.typed").exists()


@pytest.mark.parametrize("name", ["__version__"])
def test_version_is_lazy_and_cached(name):
    assert getattr(redlock, name) == redlock.version()
    assert name in dir(redlock)
    with pytest.raises(AttributeError):
        redlock.no_such_attribute  # noqa: B018
