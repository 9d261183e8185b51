# DETR-R50 on COCO 2017 with DETR's recipe; encoder encoding: 2D ALiBi. Needs GPUs (bash tools/dist_train.sh).
_base_ = ['../_base_/models/detr-r50.py', '../_base_/datasets/coco-detr.py', '../_base_/schedules/detr-500e.py',
          '../_base_/detr_runtime.py']
model = dict(encoder=dict(encoding=dict(type='ALiBi2D')))
