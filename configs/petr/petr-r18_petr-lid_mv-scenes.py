# PETR-R18 on mv-scenes at 90x160 px per camera; encoding: PETR's ray embedding with LID depth bins (32 bins from
# 1 m to 20 m) plus its multi-view 2D sine branch.
_base_ = ['../_base_/models/petr-r18_mv-scenes.py', '../_base_/datasets/mv-scenes.py',
          '../_base_/schedules/petr-mv-scenes.py', '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='PETR', depth_num=32, depth_mode='LID', position_range={{_base_.position_range}}))
