# Point-cloud 3D detection runtime: vispe's default runtime, best checkpoint by AP50 (3DETR's mAP at IoU 0.5).
_base_ = ['./default_runtime.py']
default_hooks = dict(checkpoint=dict(save_best='indoor/mAP50', rule='greater'))
custom_hooks = [dict(type='WeightsCheckpointHook', metric='indoor/mAP50')]
