# Depth from crops with timm's learned absolute position embedding of the crop's 8x8 patch grid: where a patch lies in
# the crop, nothing of where the crop lies in the image.
_base_ = ['../_base_/models/vit-t4_crop-depth.py', '../_base_/datasets/mv-crops-depth.py',
          '../_base_/schedules/crops-mv-depth.py', '../_base_/crops_runtime.py']
model = dict(backbone=dict(encoding=dict(type='LearnedAPE')))
