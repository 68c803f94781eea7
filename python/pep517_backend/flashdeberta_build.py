"""The PEP 517 build backend of the Python package: `pip install .` builds the extension with the project's
CMake for the Python that runs pip, and packs python/flashdeberta with it into a wheel.

It needs nothing beyond the standard library (pyproject.toml's build-system.requires is empty), so pip's
isolated build environment installs nothing and the install works offline; what the build itself needs comes
from the system (CMake, a C++20 compiler, pybind11: scripts/install_deps.sh installs Debian's). The build tree
is kept (build-python-<interpreter tag>/ under the source tree, ignored by git), so installing again after a
change rebuilds only what changed.

Settings (pip's --config-settings KEY=VALUE, or the environment variable where named):
  build-dir    FLASHDEBERTA_PYTHON_BUILD_DIR  the CMake build tree to use (an existing one is reused as it is
                                              configured: its Python must be the one installing)
  cmake-args   FLASHDEBERTA_CMAKE_ARGS        more -D options for the first configure, space-separated (e.g.
                                              -DFLASHDEBERTA_WITH_CUDA=OFF to leave out the CUDA backend)
  jobs         FLASHDEBERTA_BUILD_JOBS        parallel compile jobs (default: the cores)
"""

import base64
import csv
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "flashdeberta"


def _version():
    match = re.search(r"project\(FlashDeberta VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not match:
        raise RuntimeError(f"{ROOT / 'CMakeLists.txt'}: no 'project(FlashDeberta VERSION x.y.z' line")
    return match.group(1)


def _setting(config_settings, key, variable, default=None):
    value = (config_settings or {}).get(key)
    if value is None:
        value = os.environ.get(variable, default)
    return value


def _interpreter_tag():
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def _platform_tag():
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _metadata():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: DeBERTa (v1, v2, v3, mDeBERTa) Hugging Face checkpoints on a flash-style C++ engine\n"
            "License: Apache-2.0\nRequires-Python: >=3.9\nRequires-Dist: numpy\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _run(command, **kwargs):
    print("flashdeberta build:", " ".join(shlex.quote(str(c)) for c in command), file=sys.stderr, flush=True)
    subprocess.run([str(c) for c in command], check=True, **kwargs)


def _build_extension(config_settings):
    """Configures (once) and builds the target flashdeberta_python; returns the package folder it fills."""
    default_dir = ROOT / f"build-python-{_interpreter_tag()}"
    build = Path(_setting(config_settings, "build-dir", "FLASHDEBERTA_PYTHON_BUILD_DIR", default_dir)).resolve()
    if not (build / "CMakeCache.txt").exists():
        extra = shlex.split(_setting(config_settings, "cmake-args", "FLASHDEBERTA_CMAKE_ARGS", ""))
        _run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DFLASHDEBERTA_BUILD_PYTHON=ON",
              f"-DPython_EXECUTABLE={sys.executable}", "-DFLASHDEBERTA_BUILD_TESTS=OFF",
              "-DFLASHDEBERTA_BUILD_BENCH=OFF", "-DFLASHDEBERTA_BUILD_APPS=OFF", "-DFLASHDEBERTA_BUILD_EXAMPLES=OFF",
              *extra])
    else:
        cache = (build / "CMakeCache.txt").read_text(errors="replace")
        if "FLASHDEBERTA_BUILD_PYTHON:BOOL=ON" not in cache:
            raise RuntimeError(f"{build} is configured without the Python package (FLASHDEBERTA_BUILD_PYTHON=OFF)")
    jobs = _setting(config_settings, "jobs", "FLASHDEBERTA_BUILD_JOBS", str(os.cpu_count() or 1))
    _run(["cmake", "--build", build, "--target", "flashdeberta_python", "-j", jobs])
    package = build / "python" / NAME
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not (package / f"_native{suffix}").exists():
        built = sorted(p.name for p in package.glob("_native*"))
        raise RuntimeError(f"{build} built {built or 'no extension'}, not _native{suffix} for {sys.executable}: "
                           "configure a build tree for this Python (-DPython_EXECUTABLE) or leave build-dir unset")
    return package


def _package_files(package):
    """(path in the wheel, file) of the package: the Python sources, the extension and the backend modules."""
    extension = f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    for path in sorted(package.iterdir()):
        # Other interpreters' extensions may sit beside this one (tests/python/build_for_interpreter.sh).
        wanted = path.suffix == ".py" or path.name == extension or (
            path.suffix == ".so" and not path.name.startswith("_native"))
        if path.is_file() and wanted:
            yield f"{NAME}/{path.name}", path


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _wheel_text(tag):
    return f"Wheel-Version: 1.0\nGenerator: {NAME} build backend\nRoot-Is-Purelib: false\nTag: {tag}\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


# PEP 517 hooks ---------------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = Path(metadata_directory) / _dist_info()
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata(), encoding="utf-8")
    (info / "WHEEL").write_text(_wheel_text(f"{_interpreter_tag()}-{_interpreter_tag()}-{_platform_tag()}"))
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_extension(config_settings)
    tag = f"{_interpreter_tag()}-{_interpreter_tag()}-{_platform_tag()}"
    wheel_name = f"{NAME}-{_version()}-{tag}.whl"
    info = _dist_info()
    records = []
    target = Path(wheel_directory) / wheel_name
    partial = target.with_suffix(".whl.partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        def add(name, data):
            wheel.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data,
                           compress_type=zipfile.ZIP_DEFLATED)
            records.append(_record_line(name, data))

        for name, path in _package_files(package):
            info_entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info_entry.external_attr = (0o755 if path.suffix == ".so" else 0o644) << 16
            data = path.read_bytes()
            wheel.writestr(info_entry, data, compress_type=zipfile.ZIP_DEFLATED)
            records.append(_record_line(name, data))
        add(f"{info}/METADATA", _metadata().encode())
        add(f"{info}/WHEEL", _wheel_text(tag).encode())
        add(f"{info}/top_level.txt", f"{NAME}\n".encode())
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows(records + [[f"{info}/RECORD", "", ""]])
        wheel.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)), record.getvalue())
    partial.replace(target)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    """The files git tracks (no build trees, no fetched sources), under flashdeberta-<version>/."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    base = f"{NAME}-{_version()}"
    target = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(target, "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for name in sorted(n for n in listed.decode().split("\0") if n):
            if (ROOT / name).is_file():
                sdist.add(ROOT / name, arcname=f"{base}/{name}", recursive=False)
        data = _metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(data)
        sdist.addfile(entry, io.BytesIO(data))
    return target.name
