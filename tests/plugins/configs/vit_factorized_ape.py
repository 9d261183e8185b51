# A config that uses an encoding from a package outside vispe, imported through custom_imports.
custom_imports = dict(imports=['vispe_example_plugin.factorized_ape'], allow_failed_imports=False)
default_scope = 'vispe'
model = dict(
    type='TimmViT',
    model_name='vit_tiny_patch16_224',
    img_size=32,
    patch_size=4,
    depth=2,
    num_classes=10,
    encoding=dict(type='FactorizedAPE', max_grid=(16, 16)),
)
