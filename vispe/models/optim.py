"""Weight decay as timm applies it: none on biases, norms and the parameters a model names."""
from __future__ import annotations

from mmengine.optim import DefaultOptimWrapperConstructor
from timm.optim import param_groups_weight_decay
from torch import nn

from vispe.registry import OPTIM_WRAPPER_CONSTRUCTORS


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class NoDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """mmengine optimizer wrapper whose parameter groups follow timm's ``param_groups_weight_decay``.

    One-dimensional parameters (biases, norm scales) and every parameter a submodule lists in its
    ``no_weight_decay()`` (prefix tokens, position tables, RoPE frequencies) get no weight decay.
    """

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: dict | None = None) -> None:
        super().__init__(optim_wrapper_cfg, paramwise_cfg)
        self.paramwise_cfg = self.paramwise_cfg or {'weight_decay_rule': 'timm'}  # makes __call__ use add_params

    def add_params(self, params: list[dict], module: nn.Module, prefix: str = '', is_dcn_module=None) -> None:
        no_decay: set[str] = set()
        for name, child in module.named_modules():
            if hasattr(child, 'no_weight_decay') and callable(child.no_weight_decay):
                no_decay |= {f'{name}.{entry}' if name else entry for entry in child.no_weight_decay()}
        weight_decay = self.optimizer_cfg.get('weight_decay', 0.0)
        params.extend(param_groups_weight_decay(module, weight_decay=weight_decay, no_weight_decay_list=no_decay))
