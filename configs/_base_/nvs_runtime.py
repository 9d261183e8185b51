# Novel-view synthesis runtime: vispe's default runtime, best checkpoint by PSNR on held-out target views.
_base_ = ['./default_runtime.py']
default_hooks = dict(checkpoint=dict(save_best='nvs/psnr', rule='greater'))
custom_hooks = [dict(type='WeightsCheckpointHook', metric='nvs/psnr')]
