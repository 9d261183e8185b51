# PETR-R50 C5 on nuScenes at 512x1408 (the paper's recipe; train with tools/dist_train.sh on 8 GPUs): PETR's ray
# embedding with 64 LID depth bins from 1 m to 61.2 m plus its multi-view 2D sine branch.
_base_ = ['../_base_/models/petr-r50.py', '../_base_/datasets/nuscenes.py', '../_base_/schedules/petr-24e.py',
          '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='PETR', depth_num=64, depth_mode='LID', position_range={{_base_.position_range}}))
