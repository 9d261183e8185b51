"""Bad image batches and DETR masks fail before the model runs, with the value seen and the fix; valid
inputs give the same outputs as before the checks existed."""
from __future__ import annotations

import warnings

import pytest
import timm
import torch

import vispe
from vispe.models import inputs
from vispe.registry import MODELS

from ..helpers import max_diff, tiny_vit


@pytest.fixture(scope='module')
def vit() -> vispe.VisionTransformer:
    return tiny_vit('SinCos2D')


@pytest.fixture(scope='module')
def detr() -> torch.nn.Module:
    torch.manual_seed(0)
    return MODELS.build(dict(
        type='DETR', backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-3), num_classes=3,
        num_queries=4, embed_dim=32, image_size=64, encoder=dict(depth=1, num_heads=4, mlp_dim=64, dropout=0.0),
        decoder=dict(depth=1, num_heads=4, mlp_dim=64, dropout=0.0))).eval()


def images(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


BAD_BATCHES = [
    (lambda: torch.randint(0, 255, (2, 3, 56, 56), dtype=torch.uint8), TypeError,
     r'got torch\.uint8\. Convert to float and normalise, e\.g\. x\.float\(\) / 255'),
    (lambda: torch.randint(0, 255, (2, 3, 56, 56)), TypeError, r'got torch\.int64\. Convert to float'),
    (lambda: torch.ones(2, 3, 56, 56, dtype=torch.bool), TypeError, r'got torch\.bool\. Convert to float'),
    (lambda: images(2, 3, 56, 56, dtype=torch.float16), TypeError,
     r'torch\.float16 but the model\'s parameters are torch\.float32.*x\.to\(torch\.float32\).*torch\.autocast'),
    (lambda: images(2, 3, 56, 56, dtype=torch.bfloat16), TypeError, r'model\.to\(torch\.bfloat16\).*torch\.autocast'),
    (lambda: images(2, 3, 56, 56, dtype=torch.complex64), TypeError, r'real floating point; got torch\.complex64'),
    (lambda: torch.zeros(0, 3, 56, 56), ValueError, r'Empty batch: shape \(0, 3, 56, 56\)'),
    (lambda: torch.zeros(2, 3, 0, 56), ValueError, r'Empty images: shape \(2, 3, 0, 56\) has no pixel'),
    (lambda: images(3, 56, 56), ValueError, r'got shape \(3, 56, 56\)\. Add a batch dimension with x\.unsqueeze\(0\)'),
    (lambda: images(1, 2, 3, 56, 56), ValueError, r'got shape \(1, 2, 3, 56, 56\).*torch\.stack'),
    (lambda: images(2, 56, 56, 3), ValueError, r'got 56 in shape \(2, 56, 56, 3\)\. .*x\.permute\(0, 3, 1, 2\)'),
    (lambda: [[0.0]], TypeError, r'torch\.Tensor \(B, C, H, W\); got list\. .*torch\.as_tensor'),
]


@pytest.mark.parametrize('make,error,match', BAD_BATCHES)
def test_vit_bad_batches_name_value_and_fix(vit, make, error, match) -> None:
    with pytest.raises(error, match=match):
        vit(make())


def test_vit_channels_and_patch_size(vit) -> None:
    with pytest.raises(ValueError, match=r'Expected 3 channels \(in_chans=3\); got 1 .*in_chans=1'):
        vit(images(2, 1, 56, 56))
    with pytest.raises(ValueError, match=r'height 2 is not a multiple of the patch size 4 \(nearest: 4\)'):
        vit(images(1, 3, 2, 56))
    with pytest.raises(TypeError, match='Convert to float'):
        vit.forward_intermediates(torch.zeros(1, 3, 56, 56, dtype=torch.uint8))


def test_images_on_another_device_than_the_model(vit) -> None:
    with pytest.raises(ValueError, match=r"Images are on meta but the model's parameters on cpu\. Move the images "
                                         r"with x\.to\('cpu'\)"):
        vit(torch.empty(1, 3, 56, 56, device='meta'))


def test_fp32_input_to_a_bf16_model_offers_bf16_autocast() -> None:
    model = tiny_vit('LearnedAPE').bfloat16()
    with pytest.raises(TypeError, match=r"torch\.float32 but the model's parameters are torch\.bfloat16.*"
                                        r"torch\.autocast\('cpu', dtype=torch\.bfloat16\)"):
        model(images(1, 3, 56, 56))


def test_float64_is_refused_even_under_autocast(vit) -> None:
    """autocast does not cast float64, so it is no way out; the message does not offer it."""
    with torch.autocast('cpu', dtype=torch.bfloat16):
        with pytest.raises(TypeError, match=r'torch\.float64 .* or the model \(model\.to\(torch\.float64\)\)\.$'):
            vit(images(1, 3, 56, 56, dtype=torch.float64))


def test_nonfinite_pixels_raise_by_default_naming_count_and_image(vit) -> None:
    x = images(3, 3, 56, 56)
    x[1, 0, 5, 5] = float('nan')
    x[2, 1, 0, 0] = float('inf')
    with pytest.raises(ValueError, match=r"1 NaN and 1 infinite pixel values \(the first in image 1 of the batch\)"
                                         r".*nonfinite_inputs='warn' or 'ignore'"):
        vit(x)


def test_warn_warns_and_ignore_does_not_check(monkeypatch) -> None:
    model = tiny_vit('SinCos2D', nonfinite_inputs='warn')
    x = images(2, 3, 56, 56)
    x[0, 0, 0, 0] = float('nan')
    with pytest.warns(RuntimeWarning, match='1 NaN and 0 infinite'):
        assert model(x).shape == (2, 10)
    model.nonfinite_inputs = 'ignore'
    calls = []
    real = torch.isfinite
    monkeypatch.setattr(inputs.torch, 'isfinite', lambda t: calls.append(t.shape) or real(t))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        model(x)
    assert calls == []
    model.nonfinite_inputs = 'raise'
    model(images(2, 3, 56, 56))
    assert calls == [(2, 3, 56, 56)]  # one reduction over the batch when clean


def test_nonfinite_option_is_checked_everywhere_with_the_closest_choice() -> None:
    with pytest.raises(ValueError, match=r"nonfinite_inputs must be one of \('raise', 'warn', 'ignore'\); got "
                                         r"'rais'\. Did you mean 'raise'\?"):
        tiny_vit('NoPE', nonfinite_inputs='rais')
    with pytest.raises(ValueError, match="Did you mean 'warn'"):
        vispe.VisionTransformer(img_size=16, patch_size=8, embed_dim=16, depth=1, num_heads=2, nonfinite_inputs='wrn')
    model = tiny_vit('NoPE')
    model.nonfinite_inputs = 'ignor'
    with pytest.raises(ValueError, match="Did you mean 'ignore'"):
        model(images(1, 3, 56, 56))


def test_option_passes_through_create_vit_and_retrofit_not_to_timm() -> None:
    model = tiny_vit('NoPE', nonfinite_inputs='warn')
    assert model.nonfinite_inputs == 'warn'
    vispe.retrofit(model, encoding='SinCos2D')
    assert model.nonfinite_inputs == 'warn'  # None keeps the setting
    vispe.retrofit(model, encoding='SinCos2D', nonfinite_inputs='ignore')
    assert model.nonfinite_inputs == 'ignore'
    theirs = timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=8, depth=1, num_classes=2)
    assert vispe.retrofit(theirs, encoding='LearnedAPE').nonfinite_inputs == 'raise'
    built = MODELS.build(dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=32, patch_size=8, depth=1,
                              num_classes=2, nonfinite_inputs='ignore'))
    assert built.nonfinite_inputs == 'ignore'


def test_valid_fp32_outputs_are_unchanged() -> None:
    torch.manual_seed(1)
    theirs = timm.create_model('vit_tiny_patch16_224', img_size=56, patch_size=4, embed_dim=64, depth=2, num_heads=4,
                               num_classes=10, dynamic_img_size=True).eval()
    ours = tiny_vit('LearnedAPE')
    ours.load_state_dict(theirs.state_dict())
    x = images(2, 3, 56, 56)
    with torch.no_grad():
        checked = ours(x)
        ours.nonfinite_inputs = 'ignore'
        unchecked = ours(x)
        reference = theirs(x)
    assert torch.equal(checked, unchecked)
    assert max_diff(checked, reference) <= 1e-5


def test_mixed_precision_runs(vit) -> None:
    x = images(2, 3, 56, 56)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        for batch in (x, x.bfloat16(), x.half()):
            out = vit(batch)
            assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    half = tiny_vit('LearnedAPE').bfloat16()
    with torch.no_grad():
        assert half(x.bfloat16()).dtype == torch.bfloat16


def padded_masks() -> torch.Tensor:
    masks = torch.ones(2, 64, 64, dtype=torch.bool)
    masks[1, 40:] = False
    masks[1, :, 48:] = False
    return masks


@pytest.mark.parametrize('make,error,match', [
    (lambda: torch.zeros(2, 3, 64, 64, dtype=torch.uint8), TypeError, r'x\.float\(\) / 255'),
    (lambda: images(2, 3, 64, 64, dtype=torch.float16), TypeError, r'torch\.autocast'),
    (lambda: images(2, 1, 64, 64), ValueError, r'Expected 3 channels .*build the backbone with in_chans=1'),
    (lambda: images(3, 64, 64), ValueError, r'x\.unsqueeze\(0\)'),
    (lambda: torch.zeros(0, 3, 64, 64), ValueError, 'Empty batch'),
    (lambda: images(1, 3, 64, 5), ValueError,
     r'Image size 64x5 is too small: the backbone reduces by 8.*at least 8 px'),
])
def test_detr_bad_inputs(detr, make, error, match) -> None:
    with pytest.raises(error, match=match):
        detr(make())


def test_detr_nonfinite_inputs_option(detr) -> None:
    x = images(1, 3, 64, 64)
    x[0, 0, 0, 0] = float('inf')
    with pytest.raises(ValueError, match='0 NaN and 1 infinite'):
        detr(x)
    detr.nonfinite_inputs = 'warn'
    try:
        with pytest.warns(RuntimeWarning, match='infinite'), torch.no_grad():
            detr(x)
    finally:
        detr.nonfinite_inputs = 'raise'
    with pytest.raises(ValueError, match="Did you mean 'ignore'"):
        MODELS.build(dict(type='DETR', backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-3),
                          num_classes=3, nonfinite_inputs='ignored'))


@pytest.mark.parametrize('make,error,match', [
    (lambda m: m.long(), TypeError, r'masks must be bool, True on real pixels; got torch\.int64.*masks\.bool\(\)'),
    (lambda m: m.tolist(), TypeError, 'masks must be a bool tensor'),
    (lambda m: m[:, :32], ValueError, r'shape \(B, H, W\) = \(2, 64, 64\) .*got \(2, 32, 64\)'),
    (lambda m: m[:, None], ValueError, r'got \(2, 1, 64, 64\)'),
    (lambda m: torch.zeros_like(m), ValueError,
     r"masks\[0\] has no True pixel.*True on real pixels; DETR's original code uses True = padding, so pass ~mask"),
    (lambda m: torch.stack([m[1], ~m[1]]), ValueError,
     r'masks\[1\] is True on the bottom or right border.*True = padding, so pass ~mask'),
    (lambda m: m.flip(-1), ValueError, r'masks\[1\] is True on 1920 pixels that are not a top-left rectangle'),
])
def test_detr_masks_dtype_shape_and_convention(detr, make, error, match) -> None:
    with pytest.raises(error, match=match):
        detr(images(2, 3, 64, 64), make(padded_masks()))


def test_detr_checks_run_before_the_backbone(detr, monkeypatch) -> None:
    monkeypatch.setattr(detr.backbone, 'forward', lambda x: pytest.fail('the backbone ran'))
    with pytest.raises(ValueError, match='no True pixel'):
        detr(images(2, 3, 64, 64), torch.zeros(2, 64, 64, dtype=torch.bool))
    with pytest.raises(ValueError, match="mode must be 'loss', 'predict' or 'tensor'"):
        detr(images(2, 3, 64, 64), mode='tensors')
    with pytest.raises(ValueError, match="mode='loss' needs data_samples"):
        detr(images(2, 3, 64, 64), mode='loss')


def test_detr_valid_padded_batch_is_unchanged(detr) -> None:
    x, masks = images(2, 3, 64, 64), padded_masks()
    with torch.no_grad():
        checked = detr(x, masks)
        detr.nonfinite_inputs = 'ignore'
        try:
            unchecked = detr(x, masks)
        finally:
            detr.nonfinite_inputs = 'raise'
        with torch.autocast('cpu', dtype=torch.bfloat16):
            mixed = detr(x, masks)
    assert torch.equal(checked['boxes'], unchecked['boxes']) and torch.equal(checked['logits'], unchecked['logits'])
    assert torch.isfinite(mixed['boxes']).all()


@pytest.mark.parametrize('overrides, match', [
    (dict(patch_size=0), r'patch_size must be a whole number of at least 1'),
    (dict(depth=0), r'depth must be a whole number of at least 1'),
    (dict(embed_dim=64, num_heads=5), r'embed_dim 64 is not divisible by num_heads 5; .*\(e.g. 4\)'),
    (dict(img_size=2, patch_size=4), r'img_size \(2, 2\) is smaller than one patch \(4, 4\)'),
])
def test_create_vit_refuses_sizes_timm_would_divide_by(overrides, match) -> None:
    """Before: ZeroDivisionError, IndexError, a timm assertion, an error about LearnedAPE's grid."""
    with pytest.raises(ValueError, match=match):
        vispe.create_vit('vit_tiny_patch16_224', **overrides)


def test_classifier_labels_are_checked_before_the_loss() -> None:
    model = MODELS.build(dict(type='ImageClassifier', backbone=dict(
        type='TimmViT', model_name='vit_tiny_patch16_224', img_size=28, patch_size=4, in_chans=1, embed_dim=64,
        depth=1, num_heads=4, num_classes=10)))
    images = torch.randn(2, 1, 28, 28)
    assert set(model(images, torch.tensor([1, 9]), mode='loss')) == {'loss'}
    with pytest.raises(ValueError, match=r'Image 1 of the batch has label 12, outside 0..9 \(num_classes=10\)'):
        model(images, torch.tensor([1, 12]), mode='loss')
    with pytest.raises(ValueError, match=r'Labels must be \(B,\) class indices or \(B, 10\) soft targets'):
        model(images, torch.tensor([1.0, 2.0]), mode='loss')


def test_detr_needs_one_data_sample_per_image(detr) -> None:
    with pytest.raises(ValueError, match='1 data samples for a batch of 2 images: give one per image'):
        detr(torch.randn(2, 3, 64, 64), torch.ones(2, 64, 64, dtype=torch.bool), [dict(image_id=1)], mode='predict')


@pytest.mark.parametrize('encoding', ['SinCos2D', dict(type='FourierFeatures')], ids=['sincos', 'fourier'])
def test_absolute_tables_follow_a_half_precision_model(encoding) -> None:
    """Before, a float32 table promoted bf16 tokens and LayerNorm failed on mixed dtypes."""
    model = tiny_vit(encoding).to(torch.bfloat16)
    assert model(torch.randn(1, 3, 56, 56, dtype=torch.bfloat16)).dtype == torch.bfloat16
