# DETR-R18 on the Fashion-MNIST detection set at 64 px; encoder encoding: DETR's own 2D sine embedding (the baseline), added to q and k in every layer.
_base_ = ['../_base_/models/detr-r18_fmnist-det.py', '../_base_/datasets/fmnist-det-64.py',
          '../_base_/schedules/detr-fmnist-8e.py', '../_base_/detr_runtime.py']
model = dict(encoder=dict(encoding=dict(type='DETRSine')))
