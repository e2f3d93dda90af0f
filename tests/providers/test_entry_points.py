"""Entry-point discovery skips importlib.metadata only when no distribution can declare the group."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from providers.entry_points import entry_points, group_may_be_declared

GROUP = "agent_gateway.plugins"


def install(site: Path, dist: str, entry_points_txt: str | None) -> None:
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    if entry_points_txt is not None:
        (info / "entry_points.txt").write_text(entry_points_txt)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sys.path holding only one fresh site directory, so the answers do not depend on this venv."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.setattr("sys.path", [str(folder)])
    return folder


def test_distributions_declaring_other_groups_only_mean_no_plugins(site: Path) -> None:
    install(site, "withscripts", "[console_scripts]\ntool = withscripts:main\n")
    install(site, "bare", None)
    (site / "legacy.egg-info").write_text("Metadata-Version: 1.0\n")  # an .egg-info file has no entry points

    assert group_may_be_declared(GROUP) is False
    assert entry_points(GROUP) == []


def test_a_distribution_declaring_the_group_is_read_through_importlib_metadata(site: Path) -> None:
    install(site, "agwplugin", f"[console_scripts]\nx = y:z\n\n  [{GROUP}]\nmine = agw_mine\n")

    assert group_may_be_declared(GROUP) is True
    assert [(e.name, e.value) for e in entry_points(GROUP)] == [("mine", "agw_mine")]


def test_the_same_entry_point_seen_twice_on_sys_path_counts_once(site: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    again = tmp_path / "again"
    for folder in (site, again):
        install(folder, "agwtwice", f"[{GROUP}]\ntwice = agw_twice\n")
    monkeypatch.setattr("sys.path", [str(site), str(again)])

    assert [e.name for e in entry_points(GROUP)] == ["twice"]


def test_a_zip_on_sys_path_is_always_scanned(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
        zipped.writestr("zipped-1.0.dist-info/entry_points.txt", f"[{GROUP}]\nzipped = agw_zipped\n")
    monkeypatch.setattr("sys.path", [str(site), str(archive)])

    assert group_may_be_declared(GROUP) is True
    assert [e.name for e in entry_points(GROUP)] == ["zipped"]


def test_a_metadata_finder_of_its_own_is_always_asked(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Finder:
        @staticmethod
        def find_spec(*args: object) -> None:
            return None

        @staticmethod
        def find_distributions(*args: object) -> list[object]:
            return []

    monkeypatch.setattr("sys.meta_path", [*sys.meta_path, Finder])

    assert group_may_be_declared(GROUP) is True
