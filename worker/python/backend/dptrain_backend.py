"""The PEP 517 build backend of the dptrain Python package (pyproject.toml).

dptrain is three pure-Python modules over libdptrain (ctypes), so its
wheel is a zip of them and of the metadata of pyproject.toml's [project]
table. This backend builds it with the standard library alone, so that
``pip install`` works without an index: a virtual environment of Python
3.11 has setuptools 65 but not the ``wheel`` package that setuptools needs
to build a wheel, and a cluster's login node often reaches no index.

It implements the mandatory hooks (build_wheel, build_sdist) and PEP 660's
build_editable (``pip install -e``: a .pth file naming the source tree).
Only the [project] keys used by pyproject.toml are read: name, version,
description, requires-python, optional-dependencies.
"""

import ast
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "dptrain"
# A fixed timestamp in every archive: the same sources give the same bytes
# (the zip format cannot store times before 1980).
_EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", 315532800))


def _read_pyproject():
    path = os.path.join(_ROOT, "pyproject.toml")
    try:
        import tomllib  # Python >= 3.11
    except ImportError:
        tomllib = None
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)
    # Before 3.11: the file uses tables, strings and arrays of strings
    # only, whose TOML spelling is also Python's.
    doc = table = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
            if m:
                table = doc
                for key in m.group(1).split("."):
                    table = table.setdefault(key, {})
                continue
            m = re.fullmatch(r'([A-Za-z0-9_-]+|"[^"]*")\s*=\s*(.+)', line)
            if not m:
                raise ValueError("%s:%d: cannot read %r" % (path, lineno, line))
            table[m.group(1).strip('"')] = ast.literal_eval(m.group(2))
    return doc


def _project():
    project = _read_pyproject()["project"]
    for key in ("name", "version"):
        if not isinstance(project.get(key), str):
            raise ValueError("pyproject.toml: [project] needs %s" % key)
    return project


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % project["name"],
        "Version: %s" % project["version"],
    ]
    if "description" in project:
        lines.append("Summary: %s" % project["description"])
    if "requires-python" in project:
        lines.append("Requires-Python: %s" % project["requires-python"])
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: %s" % extra)
        for req in reqs:
            lines.append('Requires-Dist: %s; extra == "%s"' % (req, extra))
    return "\n".join(lines) + "\n"


def _sources():
    """(path in the archive, path on disk) of the package's modules."""
    pkg = os.path.join(_ROOT, _PACKAGE)
    return [
        ("%s/%s" % (_PACKAGE, name), os.path.join(pkg, name))
        for name in sorted(os.listdir(pkg))
        if name.endswith(".py")
    ]


def _wheel(directory, files, project):
    """Write the wheel of FILES ((archive path, bytes)) into DIRECTORY;
    return its file name."""
    dist = "%s-%s" % (_dist_name(project), project["version"])
    info = dist + ".dist-info"
    files = list(files) + [
        ("%s/METADATA" % info, _metadata(project).encode()),
        ("%s/WHEEL" % info,
         b"Wheel-Version: 1.0\nGenerator: dptrain_backend\n"
         b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = []
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (name, digest.decode(), len(data)))
    record.append("%s/RECORD,," % info)
    files.append(("%s/RECORD" % info, ("\n".join(record) + "\n").encode()))
    wheel_name = dist + "-py3-none-any.whl"
    stamp = time.gmtime(max(_EPOCH, 315532800))[:6]
    with zipfile.ZipFile(os.path.join(directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            entry = zipfile.ZipInfo(name, stamp)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    return wheel_name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory,
                  [(name, _read(path)) for name, path in _sources()],
                  _project())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # The source tree goes on sys.path: edits of worker/python/dptrain/
    # take effect without a reinstall.
    return _wheel(wheel_directory,
                  [("%s.pth" % _PACKAGE, (_ROOT + "\n").encode())],
                  _project())


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    members = [("pyproject.toml", os.path.join(_ROOT, "pyproject.toml")),
               ("backend/dptrain_backend.py", os.path.abspath(__file__))]
    members += _sources()
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz",
                      format=tarfile.PAX_FORMAT) as tf:
        for arcname, data in [("PKG-INFO", _metadata(project).encode())] + [
                (arc, _read(path)) for arc, path in members]:
            entry = tarfile.TarInfo("%s/%s" % (base, arcname))
            entry.size, entry.mtime, entry.mode = len(data), _EPOCH, 0o644
            tf.addfile(entry, io.BytesIO(data))
    return name
