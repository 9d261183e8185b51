"""DistributedDataParallel for mmengine's Runner on GPUs and on CPUs (gloo)."""
from __future__ import annotations

from typing import Any

from mmengine.model import MMDistributedDataParallel
from torch import nn

from vispe.registry import MODEL_WRAPPERS


@MODEL_WRAPPERS.register_module()
class AnyDeviceDistributedDataParallel(MMDistributedDataParallel):
    """mmengine's ``MMDistributedDataParallel`` that drops ``device_ids`` for a module on the CPU.

    mmengine always passes ``device_ids=[LOCAL_RANK]``, which DDP refuses for CPU modules, so
    training with ``tools/dist_train.sh`` on CPU processes (gloo) needs this wrapper; on GPUs it
    behaves as mmengine's. Configs select it with
    ``model_wrapper_cfg = dict(type='vispe.AnyDeviceDistributedDataParallel')``.
    """

    def __init__(self, module: nn.Module, device_ids: list[int] | None = None, **kwargs: Any) -> None:
        on_cpu = all(param.device.type == 'cpu' for param in module.parameters())
        super().__init__(module=module, device_ids=None if on_cpu else device_ids, **kwargs)
