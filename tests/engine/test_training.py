"""Config-driven training through mmengine's Runner (one config per encoding family; every config builds and
trains a step); resume; test.py on best.pth."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vispe
from vispe import serialization
from vispe.engine import build_runner, load_config, named_unknown_types
from vispe.registry import ENCODINGS, MODELS, UnknownTypeError

from ..conftest import REPO_ROOT

CONFIGS = sorted((REPO_ROOT / 'configs' / 'vit').glob('vit-t4_*_fmnist-28.py'))


def encoding_family(config: Path) -> str:
    """The family of the config's encoding; a stack's is its members' families joined ('absolute+bias')."""
    encoding = load_config(config).model.backbone.encoding
    members = encoding if isinstance(encoding, list) else [encoding]
    return '+'.join(ENCODINGS.get(member['type']).family for member in members)


def one_config_per_family() -> list[Path]:
    """The first config (by name) of each encoding family: absolute, rotary, bias, conditional, ..."""
    chosen: dict[str, Path] = {}
    for config in CONFIGS:
        chosen.setdefault(encoding_family(config), config)
    return list(chosen.values())
SMALL = {'train_dataloader.dataset.subset': 64, 'train_dataloader.batch_size': 32,
         'val_dataloader.dataset.subset': 40, 'test_dataloader.dataset.subset': 40, 'train_cfg.max_epochs': 1,
         'default_hooks.logger.interval': 1, 'log_level': 'WARNING'}


def small_runner(config: Path, work_dir: Path, **overrides):
    cfg = load_config(config, {**SMALL, **overrides}, work_dir)
    cfg.experiment_name = f'{config.stem}_{work_dir.name}'
    return build_runner(cfg)


def test_every_config_builds_and_takes_a_training_step() -> None:
    torch.manual_seed(0)
    for config in CONFIGS:
        with named_unknown_types():
            model = MODELS.build(load_config(config).model)
        model.train()
        images, labels = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
        loss = model(images, labels, mode='loss')['loss']
        loss.backward()
        assert torch.isfinite(loss), config.stem
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad), config.stem


def test_runner_initialisation_keeps_the_weights_the_model_was_built_with() -> None:
    """mmengine's Runner calls ``model.init_weights()`` before training; it used to re-run timm's ViT init over
    the whole model, so FourierFeatures' W_r trained from std 0.02 whatever its gamma, and head_bias_init was
    zeroed."""
    for config in CONFIGS:
        torch.manual_seed(0)
        model = MODELS.build(load_config(config).model)
        built = {name: value.clone() for name, value in model.state_dict().items()}
        model.init_weights()
        for name, value in model.state_dict().items():
            assert torch.equal(value, built[name]), f'{config.stem}: {name}'
    fourier = MODELS.build(load_config(REPO_ROOT / 'configs' / 'vit' / 'vit-t4_fourier_fmnist-28.py').model)
    fourier.init_weights()
    assert fourier.backbone.encoding.freqs.weight.std() > 0.05  # std 1/gamma = 0.1, not timm's 0.02
    biased = MODELS.build(dict(load_config(CONFIGS[0]).model, head_bias_init=-6.9))
    biased.init_weights()
    assert torch.all(biased.backbone.get_classifier().bias == -6.9)


@pytest.mark.slow
@pytest.mark.parametrize('config', one_config_per_family(), ids=lambda p: p.stem)
def test_a_few_iterations_and_a_checkpoint_per_encoding_family(config, tmp_path) -> None:
    runner = small_runner(config, tmp_path)
    messages: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: messages.append(record.getMessage())
    runner.logger.addHandler(handler)
    try:
        runner.train()
    finally:
        runner.logger.removeHandler(handler)
    assert not [m for m in messages if 'FileClient' in m or 'HardDiskBackend' in m]
    assert (tmp_path / 'epoch_1.pth').is_file()
    best = torch.load(tmp_path / 'best.pth', weights_only=True)
    assert 'accuracy/top1' in best['meta']['metrics']
    fresh = small_runner(config, tmp_path / 'fresh')
    vispe.load_checkpoint(fresh.model, tmp_path / 'best.pth')
    for key, value in fresh.model.state_dict().items():
        assert torch.equal(value, best['state_dict'][key]), key


@pytest.mark.slow
def test_resume_restores_epoch_and_optimizer_state(tmp_path) -> None:
    config = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_rope-mixed_fmnist-28.py'
    small_runner(config, tmp_path).train()
    saved = serialization.load(tmp_path / 'epoch_1.pth')
    resumed = small_runner(config, tmp_path, resume=True, **{'train_cfg.max_epochs': 2})
    resumed.load_or_resume()
    assert resumed.train_loop.epoch == 1 and resumed.train_loop.iter == saved['meta']['iter'] == 2
    state = resumed.optim_wrapper.optimizer.state_dict()['state']
    assert all(torch.equal(state[i]['exp_avg'], saved['optimizer']['state'][i]['exp_avg']) for i in state)
    resumed.train()
    assert resumed.train_loop.epoch == 2 and (tmp_path / 'epoch_2.pth').is_file()


def test_unknown_type_in_a_config_names_the_closest(tmp_path) -> None:
    config = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'
    cfg = load_config(config, {**SMALL, 'train_dataloader.dataset.type': 'FashionMNISt'}, tmp_path)
    with pytest.raises(UnknownTypeError, match="Did you mean 'FashionMNIST'"), named_unknown_types():
        build_runner(cfg).train()


@pytest.mark.slow
def test_train_and_test_tools(tmp_path) -> None:
    config = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_lookhere_fmnist-28.py'
    options = [f'{key}={value}' for key, value in SMALL.items()]
    train = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), str(config), '--work-dir',
                            str(tmp_path), '--cfg-options', *options], capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr
    test = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'test.py'), str(config), str(tmp_path / 'best.pth'),
                           '--work-dir', str(tmp_path / 'test'), '--cfg-options', *options,
                           'test_dataloader.dataset.image_size=56'], capture_output=True, text=True, timeout=600)
    assert test.returncode == 0, test.stderr
    metrics = json.loads(test.stdout.strip().splitlines()[-1])
    assert set(metrics) == {'accuracy/top1', 'accuracy/top5'}
    amp = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), str(config), '--amp', '--work-dir',
                          str(tmp_path / 'amp'), '--cfg-options', *options],
                         capture_output=True, text=True, timeout=600)
    if torch.cuda.is_available():
        assert amp.returncode == 0, amp.stderr
        assert (tmp_path / 'amp' / 'best.pth').is_file()
    else:
        assert amp.returncode == 2 and 'needs a CUDA device' in amp.stderr


@pytest.mark.slow
def test_two_process_ddp_on_cpu(tmp_path) -> None:
    import os
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    config = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'
    env = dict(os.environ, PYTHON=sys.executable, PORT=str(port), OMP_NUM_THREADS='1')
    result = subprocess.run(['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), str(config), '2', '--work-dir',
                             str(tmp_path), '--cfg-options', 'train_dataloader.dataset.subset=128',
                             'train_dataloader.batch_size=32', 'val_dataloader.dataset.subset=40',
                             'train_cfg.max_epochs=1'], capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'Epoch(train) [1][2/2]' in result.stdout + result.stderr
    best = torch.load(tmp_path / 'best.pth', weights_only=True)
    assert not any(key.startswith('module.') for key in best['state_dict'])
