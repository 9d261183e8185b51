"""The core install and its extras: with every optional package hidden, ``import vispe`` and every 2D encoding in a
ViT work, and each 3D, Gaussian or export feature raises a MissingExtraError that names its extra; the extras in
pyproject.toml install what vispe.extras says they do."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib

import pytest

from vispe.extras import EXTRAS, NUSCENES_DEVKIT_INSTALL

from .conftest import REPO_ROOT

# A module set to None in sys.modules is not installed as far as import and importlib.util.find_spec can tell.
HIDE = textwrap.dedent('''
    import sys
    for name in {hidden!r}:
        sys.modules[name] = None
''')


def run_without_extras(code: str) -> subprocess.CompletedProcess:
    script = HIDE.format(hidden=sorted(EXTRAS)) + textwrap.dedent(code)
    return subprocess.run([sys.executable, '-c', script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def dependencies() -> tuple[list[str], dict[str, list[str]]]:
    project = tomllib.loads((REPO_ROOT / 'pyproject.toml').read_text())['project']
    return project['dependencies'], project['optional-dependencies']


def distribution(requirement: str) -> str:
    return re.split(r'[\s<>=!~;\[]', requirement, maxsplit=1)[0].lower()


@pytest.mark.slow
def test_the_core_runs_every_2d_encoding_in_a_vit() -> None:
    result = run_without_extras('''
        import torch, vispe
        built = []
        for name, cls in sorted(vispe.registry.ENCODINGS.module_dict.items()):
            if not isinstance(cls, type) or not issubclass(cls, vispe.encodings.PositionEncoding):
                continue
            if set(cls.requires) - {'grid'}:
                continue
            model = vispe.create_vit('vit_tiny_patch16_224', encoding=dict(type=name, **cls.examples[0]), img_size=32,
                                     patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=3).eval()
            assert model(torch.randn(1, 3, 32, 32)).shape == (1, 3)
            built.append(name)
        import vispe.models.detr, vispe.datasets, vispe.evaluation, vispe.geometry
        print(' '.join(built))
    ''')
    assert result.returncode == 0, result.stderr[-3000:]
    built = result.stdout.split()
    assert {'RoPEMixed', 'LookHere', 'iRPE', 'SinCos2D', 'PEG', 'ComRoPE'} <= set(built), built


FEATURES = {
    'open3d': ("import os, tempfile; from vispe.geometry import write_points; "
               "write_points(os.path.join(tempfile.mkdtemp(), 'scan.ply'), [[0.0, 0.0, 0.0]])", '3d'),
    'mv-scenes renderer': ('import vispe.datasets.mv_scenes.render', '3d'),
    'trimesh': ('from pathlib import Path; from vispe.datasets.mv_scenes.meshes import CLASS_MESHES, load_mesh; '
                "load_mesh(CLASS_MESHES[0], Path('m.obj'))", '3d'),
    'skimage': ('from vispe.datasets.stereo_motorcycle import motorcycle_rgbd; motorcycle_rgbd()', '3d'),
    'fpsample': ("import torch; from vispe.geometry import farthest_point_sample; "
                 "farthest_point_sample(torch.zeros(1, 4, 3), 2, backend='fpsample')", '3d'),
    'plyfile': ("from vispe.gaussians import read_gaussians_ply; read_gaussians_ply('g.ply')", 'gaussians'),
    'onnx': ('import torch; from vispe.export import export_onnx; export_onnx(torch.nn.Identity(), (torch.ones(1),), '
             "'x.onnx')", 'export'),
}


@pytest.mark.slow
@pytest.mark.parametrize('feature', sorted(FEATURES))
def test_a_feature_without_its_extra_names_the_extra(feature: str) -> None:
    code, extra = FEATURES[feature]
    result = run_without_extras(code)
    assert result.returncode != 0
    assert 'MissingExtraError' in result.stderr and f'pip install "vispe[{extra}]"' in result.stderr, \
        result.stderr[-2000:]


def test_each_extra_installs_the_packages_vispe_imports_from_it() -> None:
    core, extras = dependencies()
    core_names = {distribution(requirement) for requirement in core}
    for module, (extra, package) in EXTRAS.items():
        assert package.lower() not in core_names, f'{package} is optional ({extra}) but in the core'
        if extra == 'nuscenes':
            assert f'nuscenes-devkit==' in NUSCENES_DEVKIT_INSTALL and 'vispe[nuscenes]' in NUSCENES_DEVKIT_INSTALL
            continue
        names = {distribution(requirement) for requirement in extras[extra]}
        assert package.lower() in names or (package == 'open3d' and 'open3d-cpu' in names), (module, extra, names)
    # [all] is every feature; the trackers of online services (W&B, MLflow) and gsplat's CUDA rasterizer ([render])
    # are installed by choice, and the tools of development (tests, the docs site: [dev] includes [docs]) are not
    # features.
    assert set(extras['all'][0].split('[')[1].rstrip(']').split(',')) == (
        set(extras) - {'all', 'dev', 'docs', 'wandb', 'mlflow', 'render'})
    assert 'vispe[docs]' in extras['dev']


def test_open3d_comes_as_the_right_wheel_per_platform() -> None:
    _, extras = dependencies()
    markers = {distribution(requirement): requirement.split(';')[1].strip() for requirement in extras['3d']
               if requirement.startswith('open3d')}
    assert markers == {'open3d-cpu': "platform_system == 'Linux' and platform_machine == 'x86_64'",
                       'open3d': "platform_system != 'Linux' or platform_machine != 'x86_64'"}
