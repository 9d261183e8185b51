"""vispe's CheckpointHook is mmengine's without the deprecation warnings mmengine raises about itself."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import mmengine.hooks
import pytest
from mmengine.logging import MessageHub, MMLogger
from mmengine.registry import DefaultScope

from vispe.engine import CheckpointHook
from vispe.registry import HOOKS


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize('hook_type', [mmengine.hooks.CheckpointHook, CheckpointHook])
def test_before_train_logs_no_mmengine_self_deprecation(hook_type, tmp_path) -> None:
    logger = MMLogger.get_instance(f'test_hooks_{hook_type.__module__}', log_level='INFO')
    records = Records()
    logger.addHandler(records)
    runner = SimpleNamespace(work_dir=str(tmp_path), logger=logger,
                             message_hub=MessageHub.get_instance(f'test_hooks_{hook_type.__module__}'))
    try:
        hook_type(interval=1, save_best='accuracy/top1', rule='greater').before_train(runner)
    finally:
        logger.removeHandler(records)
    deprecations = [m for m in records.messages if 'FileClient' in m or 'HardDiskBackend' in m]
    assert f'Checkpoints will be saved to {tmp_path}.' in records.messages
    assert bool(deprecations) == (hook_type is mmengine.hooks.CheckpointHook)


def test_configs_naming_checkpoint_hook_get_vispe_s() -> None:
    with DefaultScope.overwrite_default_scope('vispe'):
        assert type(HOOKS.build(dict(type='CheckpointHook', interval=1))) is CheckpointHook
