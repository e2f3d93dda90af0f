"""requirements.lock and requirements-build.lock (the Docker image's pinned installs) satisfy every
range pyproject.toml declares, for the runtime and for the build backend."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.gateway_process import REPO

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.M)


def locked(lock: str = "requirements.lock") -> dict[str, str]:
    text = (REPO / lock).read_text(encoding="utf-8")
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_dependency_in_pyproject_is_pinned_in_the_lock_within_its_range():
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = locked()
    for line in dependencies:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements.lock: regenerate it (see README, Docker)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, outside {requirement}: regenerate it")


def test_the_lock_pins_the_extractor_stack_that_imports():
    pins = locked()
    for name in ("trafilatura", "justext", "lxml", "lxml-html-clean"):
        assert name in pins, name


def test_the_image_installs_the_lock_with_hashes_then_the_project_without_resolving_again():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "pip install --require-hashes -r requirements.lock" in dockerfile
    assert "pip install --no-deps /tmp/wheels/*.whl" in dockerfile


def test_the_build_backend_is_pinned_with_hashes_within_the_range_pyproject_declares():
    pins = locked("requirements-build.lock")
    requires = pyproject()["build-system"]["requires"]
    assert requires, "no build backend declared"
    for line in requires:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements-build.lock: regenerate it (README, Docker)"
        assert requirement.specifier.contains(pins[name]), f"requirements-build.lock pins {name}=={pins[name]}"
    text = (REPO / "requirements-build.lock").read_text()
    for block in re.split(r"\n(?=\S)", text.strip()):
        if "==" in block and not block.startswith("#"):
            assert "--hash=sha256:" in block, block
    assert "pip install --require-hashes -r requirements-build.lock" in (REPO / "Dockerfile").read_text()


def test_the_license_is_an_spdx_expression_which_the_backend_floor_reads():
    project = pyproject()
    # a table (`{ text = ... }`) stops building with setuptools from 2027-02-18
    assert project["project"]["license"] == "MIT"
    floor = Requirement(project["build-system"]["requires"][0])
    assert floor.name == "setuptools" and not floor.specifier.contains("76.9"), "SPDX strings need setuptools >= 77"


def test_sniffio_is_a_default_dependency_while_httpcore_asks_for_it_on_every_request():
    """httpcore (under httpx, the web providers' client) tries `import sniffio` on each request and
    anyio >= 4.16 no longer installs it: without it in the default install every try is a failed
    import, ~0.95M instructions per provider call (issue 33). The test venv has it from a test
    extra, so only the declaration shows whether a production install gets it."""
    spec = importlib.util.find_spec("httpcore")
    assert spec is not None and spec.origin is not None
    if "import sniffio" not in (Path(spec.origin).parent / "_synchronization.py").read_text():
        pytest.skip("this httpcore no longer imports sniffio")
    declared = {canonicalize_name(Requirement(line).name) for line in pyproject()["project"]["dependencies"]}
    assert "sniffio" in declared
    assert "sniffio" in locked()


def test_the_lxml_extra_justext_asks_for_is_pinned_for_the_pip_of_debians_python():
    """justext requires `lxml[html_clean]`. Debian bookworm's pip 23.0 (the container smoke's stand-in
    for python:3.12-slim) in --require-hashes mode treats that as a requirement of its own and
    refuses it unpinned once the index has an lxml newer than the lock's: the lock pins it too,
    spelled as justext spells it (that pip does not normalise extras), at lxml's version. uv drops
    the line when it regenerates the lock: put it back (see its comment there)."""
    text = (REPO / "requirements.lock").read_text(encoding="utf-8")
    extra = re.search(r"^lxml\[html_clean\]==(\S+) \\\n((?:    --hash=sha256:\w+(?: \\)?\n)+)", text, re.M)
    base = re.search(r"^lxml==(\S+) \\\n((?:    --hash=sha256:\w+(?: \\)?\n)+)", text, re.M)
    assert base is not None and extra is not None, "requirements.lock lacks the lxml[html_clean] pin"
    assert extra.group(1) == base.group(1)
    assert extra.group(2) == base.group(2)  # the same files, so the same hashes
