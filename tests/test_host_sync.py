"""Forwards that never wait for the host (issue: ready for the GPU), as far as the CPU can show it: inside
tests/host_sync.py's ``as_on_a_gpu`` value checks skip the tensors as they skip a GPU's, and any read of a tensor's
values back to Python fails. The detectors of every config family forward so in eval and in training mode; bad
inputs are still refused where the batch enters, on the host. The CUDA suite (tests/cuda) repeats the forwards
under ``torch.cuda.set_sync_debug_mode('error')``."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import vispe.geometry.checks as checks
from vispe.geometry import Cameras
from vispe.geometry.checks import checking_values, host_scalar, set_value_checks, value_checks
from vispe.geometry.device_constants import device_constant
from vispe.models.entry_checks import CheckedDataPreprocessor
from vispe.registry import MODELS

from .conftest import REPO_ROOT
from .host_sync import HostRead, as_on_a_gpu
from .models.vdetr.test_detector import scenes, small_detector

def guarded(forward):
    """``forward()`` once as it is (the tables and constants a model keeps across forwards are made), then as on a
    GPU: its outputs."""
    forward()
    with as_on_a_gpu():
        return forward()


DETR_CONFIGS = sorted(path.name for path in (REPO_ROOT / 'configs' / 'detr').glob('detr-r18_*_fmnist-det.py'))
PETR_CONFIGS = sorted(path.name for path in (REPO_ROOT / 'configs' / 'petr').glob('petr-r18_*_mv-scenes.py'))
POINT_ENCODINGS = ['VertexRPE', 'FourierXYZ', 'SinCosXYZ', 'NoPE',
                   dict(type='TriPlane', channels=4, resolution=8, knn=4, centered=True)]


def build(folder: str, name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return MODELS.build(Config.fromfile(str(Path(REPO_ROOT) / 'configs' / folder / name)).model)


def test_the_stand_in_sees_reads_and_skips_value_checks() -> None:
    x = torch.ones(2)
    assert checking_values(x)
    with as_on_a_gpu():
        assert not checking_values(x)
        for read in (lambda: bool(x.sum()), lambda: x.sum().item(), lambda: x.tolist(), lambda: float(x[0]),
                     lambda: torch.nonzero(x), lambda: x.cpu()):
            with pytest.raises(HostRead):
                read()
        with value_checks('always'):
            assert checking_values(x)
        assert host_scalar(torch.tensor(3)) == 3  # a host draw by construction stays readable
    assert bool(x.sum()) and checking_values(x)


def test_value_check_modes_are_checked_and_restored() -> None:
    with pytest.raises(ValueError, match="Did you mean 'always'"):
        set_value_checks('alway')
    assert set_value_checks('always') == 'host'
    assert set_value_checks('host') == 'always'
    with pytest.raises(ValueError, match='on meta'):
        host_scalar(torch.ones((), device='meta'))


@pytest.mark.parametrize('name', DETR_CONFIGS)
@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_detr_forwards_without_reading_back(name: str, mode: str) -> None:
    model = build('detr', name).train(mode == 'train')
    images, masks = torch.randn(2, 3, 64, 80), torch.ones(2, 64, 80, dtype=torch.bool)
    masks[1, :, 48:] = False
    outputs = guarded(lambda: model(images, masks, mode='tensor'))
    assert all(torch.isfinite(value).all() for value in outputs.values() if isinstance(value, torch.Tensor))


@pytest.mark.parametrize('name', PETR_CONFIGS)
@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_petr_forwards_without_reading_back(name: str, mode: str) -> None:
    from vispe.engine.benchmark_detector import builtin_rig, synthetic_batch
    model = build('petr', name).train(mode == 'train')
    data = synthetic_batch(builtin_rig((96, 160)), 1, (96, 160), torch.device('cpu'))
    outputs = guarded(lambda: model(data['inputs'], data['masks'], data['data_samples'], mode='tensor'))
    assert torch.isfinite(outputs['logits']).all()


@pytest.mark.parametrize('encoding', POINT_ENCODINGS, ids=lambda encoding: str(encoding).split("'")[-2]
                         if isinstance(encoding, dict) else encoding)
@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_vdetr_forwards_without_reading_back(encoding, mode: str) -> None:
    model = small_detector(encoding).train(mode == 'train')
    points, _ = scenes()
    outputs = guarded(lambda: model(points, mode='tensor'))
    assert all(torch.isfinite(value).all() for value in outputs.values() if isinstance(value, torch.Tensor))


def test_bad_inputs_are_refused_where_the_batch_enters() -> None:
    """Off the host the forward skips its value checks, so the data preprocessor checks the batch before it moves;
    on the host it leaves them to the forward."""
    model = build('vit', 'vit-t4_rope-axial_fmnist-28.py')
    assert isinstance(model.data_preprocessor, CheckedDataPreprocessor)
    images = torch.randn(2, 1, 28, 28)
    images[1, 0, 3, 3] = float('inf')
    data = dict(inputs=images, data_samples=None)
    with pytest.raises(ValueError, match='The images hold 0 NaN and 1 infinite pixel values'):
        model(model.data_preprocessor(data)['inputs'], mode='tensor')
    checks_before = checks.HOST_DEVICES
    checks.HOST_DEVICES = frozenset()
    try:
        with pytest.raises(ValueError, match=r'inputs hold 0 NaN and 1 infinite values \(the first in sample 1\), '
                                             r'found where the batch enters the model'):
            model.data_preprocessor(data)
        model.data_preprocessor.nonfinite_inputs = 'ignore'
        model.data_preprocessor(data)
    finally:
        checks.HOST_DEVICES = checks_before


def test_cameras_are_checked_on_the_host_and_moved_with_their_fingerprint() -> None:
    intrinsics = torch.tensor([[[100.0, 0, 50], [0, 100, 40], [0, 0, 1]]])
    sample = dict(intrinsics=intrinsics, lidar2cam=torch.eye(4)[None], img_shape=(80, 100))
    cameras = Cameras.from_data_samples([sample], device='cpu')
    assert cameras.host_fingerprint() == cameras.fingerprint
    singular = dict(sample, intrinsics=intrinsics * torch.tensor([0.0, 1, 1])[:, None])
    with pytest.raises(ValueError, match='singular'):
        Cameras.from_data_samples([singular], device='meta')
    with as_on_a_gpu():
        unchecked = Cameras(singular['intrinsics'][None], torch.eye(4)[None, None], (80, 100))
        assert unchecked.host_fingerprint() is None
        with value_checks('always'), pytest.raises(HostRead):
            Cameras(singular['intrinsics'][None], torch.eye(4)[None, None], (80, 100))


def test_device_constants_are_made_once_per_values_dtype_and_device() -> None:
    like = torch.zeros(2)
    first = device_constant((7, 9), like)
    assert device_constant((7, 9), like) is first and torch.equal(first, torch.tensor([7.0, 9.0]))
    assert device_constant((7, 9), like, torch.float64) is not first
    assert device_constant((7, 10), like) is not first


def test_a_constant_first_made_in_inference_mode_serves_training() -> None:
    like = torch.zeros(2)
    with torch.inference_mode():
        device_constant((5.0, 6.0), like)
    weight = torch.ones(2, requires_grad=True)
    (weight * device_constant((5.0, 6.0), like)).square().sum().backward()
    assert torch.equal(weight.grad, torch.tensor([50.0, 72.0]))


def test_comrope_keeps_its_host_answer_off_the_host() -> None:
    """A degenerate spectrum read on the host keeps matrix_exp where the rates cannot be read (no device assert)."""
    from vispe.encodings import ComRoPE
    encoding = ComRoPE(head_dim=16, depth=1, num_heads=2, block_size=4, init_std=0.0)
    skew = encoding.skew().float()
    assert not encoding.has_eigenbasis(skew)
    with as_on_a_gpu():
        assert not encoding.has_eigenbasis(skew)


def test_point_batches_are_checked_where_they_enter() -> None:
    model = small_detector('NoPE')
    points, _ = scenes()
    points[0, 3, 1] = float('nan')
    checks_before = checks.HOST_DEVICES
    checks.HOST_DEVICES = frozenset()
    try:
        with pytest.raises(ValueError, match=r"1 NaN and 0 infinite values \(the first in inputs\['points'\]\)"):
            model.data_preprocessor(dict(inputs=dict(points=points), data_samples=None))
    finally:
        checks.HOST_DEVICES = checks_before
