"""Running vispe configs with mmengine: the Runner set-up shared by the tools, and vispe's hooks."""
from vispe.engine.cli import add_runner_arguments
from vispe.engine.ddp import AnyDeviceDistributedDataParallel
from vispe.engine.hooks import WeightsCheckpointHook
from vispe.engine.runner import build_runner, load_config, named_unknown_types

__all__ = ['AnyDeviceDistributedDataParallel', 'WeightsCheckpointHook', 'add_runner_arguments', 'build_runner', 'load_config', 'named_unknown_types']
