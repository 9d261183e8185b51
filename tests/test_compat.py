"""vispe.compat: the patches to mmengine are listed, still needed, and never touch checkpoint loading."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import mmengine
import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader
from torch.utils.data import Dataset

import vispe  # noqa: F401  (applies the compat patches)
from vispe import compat
from vispe.engine import VispeRunner


class PairDataset(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> dict:
        generator = torch.Generator().manual_seed(index)
        x = torch.randn(4, generator=generator)
        return dict(inputs=x, target=x.sum(0, keepdim=True))


class LinearModel(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, inputs, target=None, mode='tensor'):
        prediction = self.linear(inputs)
        if mode == 'loss':
            return dict(loss=torch.nn.functional.mse_loss(prediction, target))
        return prediction


def make_runner(work_dir: Path, max_epochs: int, runner_class: type = VispeRunner, **kwargs) -> Runner:
    return runner_class(
        model=LinearModel(),
        work_dir=str(work_dir),
        train_dataloader=dict(dataset=PairDataset(), batch_size=4, sampler=dict(type='DefaultSampler', shuffle=True),
                              collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=max_epochs),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1), logger=dict(type='LoggerHook')),
        log_level=logging.WARNING,
        randomness=dict(seed=0),
        experiment_name=f'{work_dir.name}_{max_epochs}_{runner_class.__name__}',
        **kwargs,
    )


class WritesAFile:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f'open({str(self.marker)!r}, "w").write("ran")',))


@pytest.mark.slow
def test_vispe_runner_resumes_mmengine_checkpoints_on_this_torch(tmp_path: Path) -> None:
    make_runner(tmp_path, max_epochs=2).train()
    resumed = make_runner(tmp_path, max_epochs=3, resume=True)
    resumed.train()
    assert resumed.train_loop.epoch == 3
    assert (tmp_path / 'epoch_3.pth').is_file()


@pytest.mark.slow
def test_a_plain_mmengine_runner_gets_no_trust_from_vispe(tmp_path: Path) -> None:
    """Before, ``import vispe`` made every Runner.resume in the process unpickle in full."""
    assert CheckpointLoader._schemes[''] is not None and CheckpointLoader._schemes[''].__module__ == 'mmengine.runner.checkpoint'
    assert not hasattr(Runner.resume, '__vispe_patched__') and Runner.resume.__module__ == 'mmengine.runner.runner'
    marker = tmp_path / 'ran.txt'
    make_runner(tmp_path / 'first', max_epochs=1, runner_class=Runner).train()
    crafted = tmp_path / 'first' / 'epoch_1.pth'
    torch.save({'meta': {'epoch': 1, 'iter': 4}, 'state_dict': {}, 'payload': WritesAFile(marker)}, crafted)
    runner = make_runner(tmp_path / 'first', max_epochs=2, runner_class=Runner, resume=True)
    with pytest.raises(Exception):
        runner.train()
    assert not marker.exists()


@pytest.mark.parametrize('patch', compat.PATCHES, ids=lambda patch: patch.name)
def test_every_patch_is_still_needed_by_the_installed_mmengine(patch: compat.Patch) -> None:
    """Fails when mmengine fixes the problem: then delete the patch from vispe.compat."""
    assert mmengine.__version__ == compat.MMENGINE_VERSION, 'a new mmengine: re-check every patch in vispe.compat'
    assert patch.still_broken(), f'mmengine {mmengine.__version__} no longer needs the {patch.name} patch: remove it'
    assert patch.reason and patch.targets


def test_applied_patches_are_the_needed_ones() -> None:
    assert compat.applied() == [patch.name for patch in compat.PATCHES if patch.needed()]
    assert compat.apply() == compat.applied()
    for patch in compat.PATCHES:
        for target in patch.targets:
            assert (compat.current(target) is compat.original(target)) == (patch.name not in compat.applied()), target


def test_package_helpers_work_without_pkg_resources() -> None:
    from mmengine.config import config as config_module
    from mmengine.utils import get_installed_path, is_installed
    assert is_installed('mmengine') and is_installed('torch')
    assert not is_installed('no_such_package_for_vispe')
    assert Path(get_installed_path('mmengine')) == Path(mmengine.__file__).parent
    assert Path(config_module.get_installed_path('vispe')) == Path(vispe.__file__).parent
    with pytest.raises(Exception, match='no_such_package_for_vispe'):
        get_installed_path('no_such_package_for_vispe')


def test_cpu_process_group_patch_only_without_cuda() -> None:
    import mmengine.dist.utils as dist_utils
    patched = dist_utils._init_dist_pytorch is not compat.original('mmengine.dist.utils:_init_dist_pytorch')
    assert patched == (not torch.cuda.is_available())
    assert 'RANK' not in os.environ or patched
