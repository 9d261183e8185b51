"""tests/floors.txt (the versions `make test-min` installs) holds exactly the floors pyproject.toml declares: every core
dependency with a lower bound is pinned there at that bound, so the floors the package states are the ones tested."""
from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.version import Version


def declared_floors(repo_root) -> dict[str, Version]:
    """Core dependency name -> the version of its `>=` or `==` bound, from pyproject.toml."""
    dependencies = tomllib.loads((repo_root / 'pyproject.toml').read_text())['project']['dependencies']
    floors = {}
    for requirement in map(Requirement, dependencies):
        bounds = [spec.version for spec in requirement.specifier if spec.operator in ('>=', '==')]
        if bounds:
            floors[requirement.name] = Version(bounds[0])
    return floors


def pinned_floors(repo_root) -> dict[str, Version]:
    """Package name -> its pinned version, from tests/floors.txt (pip constraints, `name==version` per line)."""
    lines = (repo_root / 'tests' / 'floors.txt').read_text().splitlines()
    pins = [Requirement(line) for line in lines if line.strip() and not line.startswith('#')]
    assert all(len(pin.specifier) == 1 and next(iter(pin.specifier)).operator == '==' for pin in pins), pins
    return {pin.name: Version(next(iter(pin.specifier)).version) for pin in pins}


def test_floors_file_pins_every_declared_floor(repo_root) -> None:
    assert pinned_floors(repo_root) == declared_floors(repo_root)
