# PETR-R18 on mv-scenes at 90x160 px per camera; encoding: 3DPPE, one point per cell at the hybrid depth (direct +
# categorical over 16 bins), keys and queries through one MLP, depth losses against the LiDAR projected into the
# images (with_depth=True); the depth net at CPU size (width 64, plain 3x3 convolutions where 3DPPE uses DCN).
_base_ = ['../_base_/models/petr-r18_mv-scenes.py', '../_base_/datasets/mv-scenes.py',
          '../_base_/schedules/petr-mv-scenes.py', '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='PPE3D', depth_num=16, position_range={{_base_.position_range}}, mid_channels=64,
                           with_dcn=False))
train_dataloader = dict(dataset=dict(with_depth=True))
