"""vispe.compat: mmengine 0.10.7 resumes on torch >= 2.6 and finds packages without pkg_resources."""
from __future__ import annotations

import logging
import pickle
from pathlib import Path

import mmengine
import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import Dataset

import vispe  # noqa: F401  (applies the compat patches)
from vispe import compat


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


def make_runner(work_dir: Path, max_epochs: int, **kwargs) -> Runner:
    return Runner(
        model=LinearModel(),
        work_dir=str(work_dir),
        train_dataloader=dict(dataset=PairDataset(), batch_size=4, sampler=dict(type='DefaultSampler', shuffle=True),
                              collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=max_epochs),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1), logger=dict(type='LoggerHook')),
        log_level=logging.WARNING,
        randomness=dict(seed=0),
        experiment_name=f'{work_dir.name}_{max_epochs}',
        **kwargs,
    )


@pytest.mark.slow
def test_runner_resumes_on_this_torch(tmp_path: Path) -> None:
    make_runner(tmp_path, max_epochs=2).train()
    assert (tmp_path / 'epoch_2.pth').is_file()
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / 'epoch_2.pth', weights_only=True)
    resumed = make_runner(tmp_path, max_epochs=3, resume=True)
    resumed.train()
    assert resumed.train_loop.epoch == 3
    assert (tmp_path / 'epoch_3.pth').is_file()


@pytest.mark.slow
def test_load_from_stays_weights_only(tmp_path: Path) -> None:
    make_runner(tmp_path / 'first', max_epochs=1).train()
    foreign = tmp_path / 'foreign.pth'
    torch.save({'state_dict': LinearModel().state_dict(), 'meta': {}, 'payload': PairDataset()}, foreign)
    runner = make_runner(tmp_path / 'second', max_epochs=1, load_from=str(foreign))
    with pytest.raises(pickle.UnpicklingError, match='weights_only=True'):
        runner.load_or_resume()
    plain = tmp_path / 'plain.pth'
    torch.save({'state_dict': LinearModel().state_dict()}, plain)
    runner = make_runner(tmp_path / 'third', max_epochs=1, load_from=str(plain))
    runner.load_or_resume()


def test_trusted_checkpoints_scope() -> None:
    assert not compat._TRUSTED.get()
    with compat.trusted_checkpoints():
        assert compat._TRUSTED.get()
    assert not compat._TRUSTED.get()


def test_package_helpers_work_without_pkg_resources() -> None:
    from mmengine.config import config as config_module
    from mmengine.utils import get_installed_path, is_installed
    assert is_installed('mmengine') and is_installed('torch')
    assert not is_installed('no_such_package_for_vispe')
    assert Path(get_installed_path('mmengine')) == Path(mmengine.__file__).parent
    assert Path(config_module.get_installed_path('vispe')) == Path(vispe.__file__).parent
    with pytest.raises(Exception, match='no_such_package_for_vispe'):
        get_installed_path('no_such_package_for_vispe')


def test_apply_is_idempotent() -> None:
    before = Runner.resume
    compat.apply()
    assert Runner.resume is before
