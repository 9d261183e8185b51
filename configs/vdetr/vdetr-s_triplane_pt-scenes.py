# V-DETR-S on pt-scenes with TC-GS's tri-plane features (Wang, Yu, Xu, arXiv 2503.20221) of xyz on the decoder's
# point keys, and of the box centres through the queries' projection. The rooms stand on z = 0, so the planes
# read coordinates around the centre of each cloud's bounds (centered=True); each point reads its 4 nearest.
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(decoder=dict(encoding=dict(type='TriPlane', channels=32, resolution=32, knn=4, centered=True)))
