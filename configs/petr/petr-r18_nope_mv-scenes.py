# PETR-R18 on mv-scenes at 90x160 px per camera; encoding: no 3D PE, only PETR's multi-view 2D sine (which camera,
# row, column: PETR's 2D-PE ablation). With a fixed rig each (camera, pixel) has one ray, so this carries what
# PETR's rays do; rig jitter, image augmentation and the second rig take that away.
_base_ = ['../_base_/models/petr-r18_mv-scenes.py', '../_base_/datasets/mv-scenes.py',
          '../_base_/schedules/petr-mv-scenes.py', '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='MultiViewSine'))
