# Detection runtime: vispe's default runtime, best checkpoint by COCO box mAP.
_base_ = ['./default_runtime.py']
default_hooks = dict(checkpoint=dict(save_best='coco/bbox_mAP', rule='greater'))
custom_hooks = [dict(type='WeightsCheckpointHook', metric='coco/bbox_mAP')]
