"""3D Gaussian Splatting scenes: the standard ``.ply`` layout (and, built on it, initialisation from coloured points
and the tri-plane-context codec)."""
from vispe.gaussians.ply import GaussianCloud, read_gaussians_ply, sh_degree_of, write_gaussians_ply

__all__ = ['GaussianCloud', 'read_gaussians_ply', 'sh_degree_of', 'write_gaussians_ply']
