# Depth from crops with KPE (Prakash et al., ECCV 2024), the centre-and-corner form: the viewing-ray angles of the
# crop's centre and four corners under the full image's K, 20L = 160 features through the 1x1 MLP, added to every
# patch token.
_base_ = ['../_base_/models/vit-t4_crop-depth.py', '../_base_/datasets/mv-crops-depth.py',
          '../_base_/schedules/crops-mv-depth.py', '../_base_/crops_runtime.py']
model = dict(backbone=dict(encoding=dict(type='KPE', mode='center-corner')))
