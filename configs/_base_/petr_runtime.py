# Multi-view 3D detection runtime: vispe's default runtime, best checkpoint by nuScenes mAP.
_base_ = ['./default_runtime.py']
default_hooks = dict(checkpoint=dict(save_best='nusc/mAP', rule='greater'))
custom_hooks = [dict(type='WeightsCheckpointHook', metric='nusc/mAP')]
