"""Running vispe configs with mmengine: the runner, its loop and hooks, and the tools' shared set-up."""
from vispe.engine.cli import add_runner_arguments
from vispe.engine.ddp import AnyDeviceDistributedDataParallel
from vispe.engine.hooks import CheckpointHook, RandomStateHook, WeightsCheckpointHook
from vispe.engine.loops import EpochBasedTrainLoop
from vispe.engine.runner import VispeRunner, build_runner, load_config, named_unknown_types

__all__ = ['AnyDeviceDistributedDataParallel', 'CheckpointHook', 'EpochBasedTrainLoop', 'RandomStateHook',
           'VispeRunner', 'WeightsCheckpointHook', 'add_runner_arguments', 'build_runner', 'load_config',
           'named_unknown_types']
