# 3DPPE on PETR-R50 C5, nuScenes at 512x1408 (drilistbox/3DPPE's recipe on this backbone; train on 8 GPUs): one point
# per cell at the hybrid depth (16 bins, DCN heads, ASPP, width 256), keys and queries through one MLP, depth losses
# against the LiDAR projected into the images.
_base_ = ['../_base_/models/petr-r50.py', '../_base_/datasets/nuscenes.py', '../_base_/schedules/petr-24e.py',
          '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='PPE3D', depth_num=16, position_range={{_base_.position_range}}, mid_channels=256,
                           context_channels=256))
train_dataloader = dict(dataset=dict(with_depth=True))
