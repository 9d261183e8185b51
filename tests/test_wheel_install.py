"""The built wheel, installed as a user installs it: a fresh virtual environment (no system site packages) with the
core dependencies resolved by pip, then the `vispe` command and the packaged configs used from a folder outside the
checkout; then `[3d]` added to the same environment and a 3D data set written with it.

torch and torchvision (with the packages they need: their CUDA libraries, triton, sympy, ...) are the one
shortcut: copying this machine's CUDA build into a new environment takes 8 minutes (6.1 GB, measured), so the new
environment sees the test interpreter's own installation of them through a ``.pth`` folder of links (the same
files pip would copy from the same wheels). pip sees them as installed and resolves every other requirement of the
wheel itself; nothing else of the test interpreter's environment is visible.

The environment is built once per test session (module fixture); the tests print what each step took and the
environment's size."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
import venv
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from vispe.datasets.fashion_mnist import default_root

from .conftest import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

CONFIG = 'vispe::vit/vit-t4_rope-mixed_fmnist-28.py'
TINY_TRAINING = ['train_dataloader.dataset.subset=32', 'train_dataloader.batch_size=16', 'train_cfg.max_epochs=1',
                 'val_dataloader.dataset.subset=16', 'test_dataloader.dataset.subset=16', 'log_level=WARNING']


@dataclass
class Installed:
    """A fresh environment holding the wheel: its interpreter, the folder commands run in, what it took."""

    root: Path
    wheel: Path
    python: Path
    work: Path
    seconds: dict[str, float] = field(default_factory=dict)
    megabytes: dict[str, float] = field(default_factory=dict)

    def run(self, *command: str | Path, timeout: float = 1800) -> subprocess.CompletedProcess:
        """Run ``command`` in the work folder (nothing of the checkout importable), checked."""
        result = subprocess.run([str(part) for part in command], cwd=self.work, env=clean_environment(),
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f'{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}'
        return result

    def pip_install(self, requirement: str, stage: str) -> None:
        start = time.perf_counter()
        self.run(self.python, '-m', 'pip', 'install', '--quiet', requirement)
        self.seconds[stage] = time.perf_counter() - start
        self.megabytes[stage] = folder_megabytes(self.python.parents[1])
        print(f'\n{stage}: {self.seconds[stage]:.0f} s, environment {self.megabytes[stage]:.0f} MB', file=sys.stderr)


def clean_environment() -> dict[str, str]:
    """This process's environment without what would make the checkout or this environment importable."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV', 'PYTHONSTARTUP')}
    environment['VISPE_FASHION_MNIST'] = str(default_root())  # the data set the other tests read
    return environment


def folder_megabytes(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob('*') if path.is_file() and not path.is_symlink()) / 2**20


TORCH = ('torch', 'torchvision')
NOT_LINKED = {'numpy', 'pillow', 'setuptools'}  # core requirements of their own: pip installs them


def torch_distributions() -> dict[str, importlib.metadata.Distribution]:
    """torch, torchvision and what they need (the extras they ask for included, e.g. torch's
    ``cuda-toolkit[cublas, ...]``), as installed for this interpreter (numpy, Pillow, setuptools left out)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending: list[tuple[str, frozenset[str]]] = [(name, frozenset()) for name in TORCH]
    done: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        name = name.lower().replace('_', '-')
        if (name, extras) in done or name in NOT_LINKED:
            continue
        done.add((name, extras))
        found[name] = importlib.metadata.distribution(name)
        for requirement in map(Requirement, found[name].requires or []):
            wanted = requirement.marker is None or any(requirement.marker.evaluate({'extra': extra})
                                                       for extra in extras | {''})
            if wanted:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return found


def link_torch(site_packages: Path, layer: Path) -> None:
    """Link the top-level files of :func:`torch_distributions` into ``layer`` and put it on the environment's path."""
    layer.mkdir()
    for distribution in torch_distributions().values():
        for top in {file.parts[0] for file in distribution.files or []} - {'..', '__pycache__'}:
            source = Path(distribution.locate_file(top))
            if not top.endswith('.pth') and source.exists() and not (layer / top).exists():
                (layer / top).symlink_to(source)
    (site_packages / 'torch-layer.pth').write_text(f'{layer}\n')


@pytest.fixture(scope='module')
def installed(tmp_path_factory) -> Installed:
    root = tmp_path_factory.mktemp('wheel-install')
    start = time.perf_counter()
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--quiet', '-w', str(root / 'dist'),
                    str(REPO_ROOT)], check=True, capture_output=True, env=clean_environment(), timeout=600)
    built = time.perf_counter() - start
    venv.create(root / 'venv', with_pip=True, system_site_packages=False)
    link_torch(next((root / 'venv' / 'lib').glob('python*/site-packages')), root / 'torch-layer')
    (root / 'work').mkdir()
    environment = Installed(root, next((root / 'dist').glob('vispe-*.whl')), root / 'venv' / 'bin' / 'python',
                            root / 'work', seconds={'wheel': built})
    environment.pip_install(str(environment.wheel), 'core')
    return environment


def test_wheel_holds_the_configs_and_the_command(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    configs = {name.removeprefix('vispe/.mim/configs/') for name in names if name.startswith('vispe/.mim/configs/')}
    assert configs == {p.relative_to(REPO_ROOT / 'configs').as_posix() for p in (REPO_ROOT / 'configs').rglob('*.py')}
    assert {'vispe/.mim/model-index.yml', 'vispe/cli/main.py', 'vispe/cli/gaussians/compress.py'} <= names
    entry_points = next(name for name in names if name.endswith('.dist-info/entry_points.txt'))
    assert 'vispe = vispe.cli.main:main' in zipfile.ZipFile(installed.wheel).read(entry_points).decode()


def test_core_install_lists_builds_every_2d_encoding_and_trains_from_a_packaged_config(installed: Installed) -> None:
    vispe_command = installed.python.parent / 'vispe'
    listing = installed.run(vispe_command, 'list').stdout
    assert 'RoPEMixed' in listing and CONFIG in listing
    built = installed.run(installed.python, '-c', '''
import torch, vispe
assert "torch-layer" in torch.__file__, torch.__file__
from vispe.extras import MissingExtraError, import_extra
assert vispe.__file__.startswith(__import__("sys").prefix), vispe.__file__
names = []
for info in vispe.list_encodings(image_only=True):
    encoding = dict(type=info.name, **vispe.registry.ENCODINGS.get(info.name).examples[0])
    vit = vispe.create_vit("vit_tiny_patch16_224", encoding=encoding, img_size=32, patch_size=4, embed_dim=64,
                           depth=1, num_heads=4, num_classes=10).eval()
    assert vit(torch.randn(1, 3, 32, 48)).shape == (1, 10)
    names.append(info.name)
try:
    import_extra("open3d", "3D scenes")
except MissingExtraError as error:
    assert 'pip install "vispe[3d]"' in str(error)
else:
    raise AssertionError("open3d is in the core install")
print(" ".join(names))
''').stdout.split()
    assert built and all(name in listing for name in built)
    start = time.perf_counter()
    installed.run(vispe_command, 'train', CONFIG, '--work-dir', 'run', '--cfg-options', *TINY_TRAINING)
    installed.seconds['train'] = time.perf_counter() - start
    assert (installed.work / 'run' / 'best.pth').is_file() and (installed.work / 'run' / 'last.pth').is_file()


def test_3d_extra_writes_a_point_scene_set(installed: Installed) -> None:
    installed.pip_install(f'{installed.wheel}[3d]', 'core+3d')
    installed.run(installed.python, '-m', 'vispe', 'dataset', 'point-scenes', '--train', '1', '--val', '1', '--test',
                  '0', '--workers', '1', '--quiet', '--out', 'pt-tiny')
    written = installed.work / 'pt-tiny'
    assert (written / 'pt-scenes.json').is_file() and len(list(written.rglob('*_vert.npy'))) == 2
    print(f'\ntimes (s): {installed.seconds}; sizes (MB): {installed.megabytes}', file=sys.stderr)
