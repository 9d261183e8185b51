# Depth-from-crops runtime: vispe's default runtime, best checkpoint by the mean AbsRel of the val crops (lower).
_base_ = ['./default_runtime.py']
default_hooks = dict(checkpoint=dict(save_best='depth/absrel', rule='less'))
custom_hooks = [dict(type='WeightsCheckpointHook', metric='depth/absrel', rule='less')]
