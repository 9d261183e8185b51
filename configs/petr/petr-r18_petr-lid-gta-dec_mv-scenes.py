# PETR-R18 on mv-scenes at 90x160 px per camera: PETR's ray embedding (LID, as petr-r18_petr-lid) on the keys and GTA
# (Miyato et al., ICLR 2024) in the decoder's cross-attention, each object query posed at its 3D reference point, so
# that queries placed by PETR's keys read the camera tokens through their relative transform E_query · E_camera⁻¹.
_base_ = ['./petr-r18_petr-lid_mv-scenes.py']
model = dict(decoder=dict(encoding=dict(type='GTA')))
