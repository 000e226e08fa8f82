"""Build hooks: build the Rust library and bundle it into the package, and tag the wheel for
this platform.

Everything else is in pyproject.toml. The library inside the package is, in order:

1. ``$REDLOCK_LIB`` when set (copied);
2. built by cargo from the repository's ``Cargo.toml`` through setuptools-rust (a build
   requirement in pyproject.toml, so ``pip install ./bindings/python`` on a machine with Rust
   builds it): the library package alone (the command-line tool is a package of its own), as
   ``redlock/_libredlock*.so``;
3. where setuptools-rust is not importable (``python setup.py …`` by hand), the repository's
   ``target/release``, then ``target/debug`` (``cargo build --release`` first; copied).

``REDLOCK_NO_BUNDLE=1`` builds a package without a copy (it then finds the library at run time
through ``REDLOCK_LIB`` or the system's library search). Without any of these, the build fails
with a message saying where it looked, rather than producing a package that cannot work.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import setuptools
from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

if sys.platform == "darwin":
    LIB_FILENAME = "libredlock.dylib"
elif sys.platform == "win32":
    LIB_FILENAME = "redlock.dll"
else:
    LIB_FILENAME = "libredlock.so"


def rust_extensions() -> list:
    """The library built by cargo (case 2 above), or none."""
    if os.environ.get("REDLOCK_LIB") or os.environ.get("REDLOCK_NO_BUNDLE") == "1":
        return []
    try:
        from setuptools_rust import Binding, RustExtension
    except ImportError:
        return []
    return [
        RustExtension(
            "redlock._libredlock",
            path=os.path.relpath(REPO / "Cargo.toml", HERE),
            binding=Binding.NoBinding,
            py_limited_api=False,
        )
    ]


RUST_EXTENSIONS = rust_extensions()


def find_library() -> "Path | None":
    if RUST_EXTENSIONS:
        return None  # built by setuptools-rust
    env = os.environ.get("REDLOCK_LIB")
    if env:
        path = Path(env)
        if not path.is_file():
            raise SystemExit(f"REDLOCK_LIB={env!r} is not a file")
        return path
    if os.environ.get("REDLOCK_NO_BUNDLE") == "1":
        return None
    looked = []
    for profile in ("release", "debug"):
        path = REPO / "target" / profile / LIB_FILENAME
        if path.is_file():
            return path
        looked.append(str(path))
    raise SystemExit(
        "redlock: the shared library to bundle was not found; run `cargo build --release` in "
        "the repository first, set REDLOCK_LIB to the library, or set REDLOCK_NO_BUNDLE=1 to "
        "install without a copy. Looked in: " + ", ".join(looked)
    )


class BuildPyWithLibrary(build_py):
    """build_py that also copies the shared library into ``redlock/``."""

    def run(self) -> None:
        super().run()
        lib = find_library()
        if lib is not None:
            dest = Path(self.build_lib) / "redlock" / LIB_FILENAME
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.announce(f"copying {lib} -> {dest}", level=2)
            shutil.copyfile(lib, dest)
            os.chmod(dest, 0o755)


cmdclass = {"build_py": BuildPyWithLibrary}

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    try:
        from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]
    except ImportError:
        bdist_wheel = None  # type: ignore[assignment,misc]

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):  # type: ignore[misc,valid-type]
        """Tags the wheel py3-none-<platform>: any Python 3 (ctypes, no extension module),
        but this platform's native library."""

        def get_tag(self):  # type: ignore[no-untyped-def]
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel


class BinaryDistribution(Distribution):
    """Not a pure-Python distribution: it carries a native library (installed to platlib)."""

    def has_ext_modules(self) -> bool:
        return True


def _license() -> dict:
    # The licence is a plain SPDX expression where setuptools supports it (>= 77), else the
    # older free-text field; pyproject.toml declares it dynamic for that reason.
    major = int(setuptools.__version__.split(".")[0])
    return {"license_expression": "MIT"} if major >= 77 else {"license": "MIT"}


setup(
    cmdclass=cmdclass,
    distclass=BinaryDistribution,
    zip_safe=False,
    **({"rust_extensions": RUST_EXTENSIONS} if RUST_EXTENSIONS else {}),
    **_license(),
)
