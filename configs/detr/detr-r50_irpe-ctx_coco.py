# DETR-R50 on COCO 2017 with DETR's recipe; encoder encoding: iRPE, product method, contextual on keys. Needs GPUs (bash tools/dist_train.sh).
_base_ = ['../_base_/models/detr-r50.py', '../_base_/datasets/coco-detr.py', '../_base_/schedules/detr-500e.py',
          '../_base_/detr_runtime.py']
model = dict(encoder=dict(encoding=dict(type='iRPE', method='product', mode='contextual', on='k')))
