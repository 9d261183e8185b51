# Depth from crops with no position at all (the floor of the comparison).
_base_ = ['../_base_/models/vit-t4_crop-depth.py', '../_base_/datasets/mv-crops-depth.py',
          '../_base_/schedules/crops-mv-depth.py', '../_base_/crops_runtime.py']
model = dict(backbone=dict(encoding=dict(type='NoPE')))
