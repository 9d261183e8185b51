"""3DPPE (Shu et al., ICCV 2023): the point encoding, its camera-aware hybrid depth net and its depth losses."""
from vispe.encodings.ppe3d.depth_loss import depth_losses, distribution_focal_loss, sparse_depth_targets
from vispe.encodings.ppe3d.depth_net import CameraAwareDepthNet, DepthNetOutput, categorical_depth, fuse_depth
from vispe.encodings.ppe3d.encoding import PPE3D

__all__ = ['CameraAwareDepthNet', 'DepthNetOutput', 'PPE3D', 'categorical_depth', 'depth_losses',
           'distribution_focal_loss', 'fuse_depth', 'sparse_depth_targets']
