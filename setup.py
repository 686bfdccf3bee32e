"""Packages: everything installs under the ``kbroker`` name (pyproject.toml holds the rest).

The protocol codec, the log and Raft live at the repository's root (``wire/``, ``log/``, ``raft/``)
but install as ``kbroker.wire``, ``kbroker.log`` and ``kbroker.raft``, so that no module of a user's
project (a ``log.py`` is common) can shadow them, and nothing of ours can shadow theirs.
"""

from setuptools import find_packages, setup

MOVED = ("wire", "log", "raft")  # folders at the root that install inside kbroker

packages = find_packages(include=["kbroker", "kbroker.*"])
package_dir = {}
for folder in MOVED:
    for package in find_packages(include=[folder, f"{folder}.*"]):
        packages.append(f"kbroker.{package}")
    package_dir[f"kbroker.{folder}"] = folder

# The console's stylesheet and script ship inside the wheel: no build step, nothing fetched at run time.
setup(packages=packages, package_dir=package_dir, package_data={"kbroker.http.console": ["static/*"]})
