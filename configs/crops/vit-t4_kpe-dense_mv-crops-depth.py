# Depth from crops with KPE (Prakash et al., ECCV 2024), the dense form: every pixel's viewing-ray angles under the
# full image's K, resized to the 8x8 patch grid, 4L = 32 channels through the 1x1 MLP, added to each patch token.
_base_ = ['../_base_/models/vit-t4_crop-depth.py', '../_base_/datasets/mv-crops-depth.py',
          '../_base_/schedules/crops-mv-depth.py', '../_base_/crops_runtime.py']
model = dict(backbone=dict(encoding=dict(type='KPE', mode='dense')))
