"""requirements.lock (the Docker image's pinned install) satisfies every range pyproject.toml declares."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.gateway_process import REPO

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.M)


def locked() -> dict[str, str]:
    text = (REPO / "requirements.lock").read_text(encoding="utf-8")
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


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
    assert "pip install --no-deps ." in dockerfile
