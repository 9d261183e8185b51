"""``vispe compress``, ``decompress``, ``gaussians-from-points``, ``gaussians-report``: 3D Gaussian bitstreams."""
