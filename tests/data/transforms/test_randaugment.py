"""RandAugment on the batch: per-op results against torchvision's functional ops, per-sample draws,
determinism under a generator, and argument checks. Runs on a few real photos shrunk to 48 px."""

import math

import pytest
import torch
import torchvision.transforms.v2.functional as TF
from PIL import Image

from fastcore_ops.data.transforms.randaugment import OPS, RandAugmentOptions, apply_ops, randaugment_batch
from fastcore_ops.data.transforms.resize import resize_batch
from tests.data.conftest import DATASETS

PHOTOS = DATASETS / "imagenet-sample"
SIZE = 48


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    paths = sorted(PHOTOS.glob("*/*.JPEG"))[:4]
    assert len(paths) == 4, f"expected real photos under {PHOTOS}"
    crops = [resize_batch(TF.pil_to_tensor(Image.open(p).convert("RGB"))[None], SIZE) for p in paths]
    return torch.cat(crops).float() / 255


def _one_op(images: torch.Tensor, name: str, level: float) -> torch.Tensor:
    n = images.shape[0]
    return apply_ops(images, torch.full((n,), OPS.index(name)), torch.full((n,), level))


def test_the_fourteen_usual_ops_are_there():
    assert sorted(OPS) == sorted(["identity", "auto_contrast", "equalize", "rotate", "solarize", "color", "posterize",
                                  "contrast", "brightness", "sharpness", "shear_x", "shear_y", "translate_x",
                                  "translate_y"])


def test_identity_op_returns_the_input(photos):
    assert torch.equal(_one_op(photos, "identity", 1.0), photos)


@pytest.mark.parametrize("name", ["color", "contrast", "brightness", "sharpness", "posterize",
                                  "rotate", "shear_x", "shear_y", "translate_x", "translate_y"])
def test_level_zero_leaves_the_image_unchanged(photos, name):
    torch.testing.assert_close(_one_op(photos, name, 0.0), photos, atol=2e-5, rtol=0)


@pytest.mark.parametrize("name", [n for n in OPS if n != "identity"])
def test_each_op_changes_the_image_and_stays_in_range(photos, name):
    out = _one_op(photos, name, 0.7)
    assert out.shape == photos.shape and out.dtype == photos.dtype
    assert 0 <= out.min() and out.max() <= 1
    assert (out - photos).abs().amax(dim=(1, 2, 3)).min() > 1e-3


def _reference(images: torch.Tensor, name: str, level: float) -> torch.Tensor:
    """torchvision's functional op at the magnitude randaugment's tables give ``level``."""
    factor = 1 + 0.9 * level
    as_uint8 = (images * 255).round().to(torch.uint8)
    return {
        "brightness": lambda: TF.adjust_brightness(images, factor),
        "contrast": lambda: TF.adjust_contrast(images, factor),
        "color": lambda: TF.adjust_saturation(images, factor),
        "sharpness": lambda: TF.adjust_sharpness(images, factor),
        "auto_contrast": lambda: TF.autocontrast(images),
        "solarize": lambda: TF.solarize(images, 1 - abs(level)),
        "equalize": lambda: TF.equalize(as_uint8).float() / 255,
        "posterize": lambda: TF.posterize(as_uint8, 8 - round(4 * abs(level))).float() / 255,
    }[name]()


@pytest.mark.parametrize("level", [0.5, -0.8])
@pytest.mark.parametrize("name", ["brightness", "contrast", "color", "sharpness", "auto_contrast", "solarize",
                                  "equalize", "posterize"])
def test_color_ops_match_torchvision(photos, name, level):
    # equalize and posterize work on 8-bit levels, so compare on images that hold exact 8-bit values
    images = (photos * 255).round() / 255
    torch.testing.assert_close(_one_op(images, name, level), _reference(images, name, level), atol=1e-4, rtol=0)


def test_rotate_matches_torchvision_away_from_the_filled_corners(photos):
    out = _one_op(photos, "rotate", 0.5)
    expected = TF.rotate(photos, -15.0, interpolation=TF.InterpolationMode.BILINEAR, fill=0.5)
    torch.testing.assert_close(out[..., 12:-12, 12:-12], expected[..., 12:-12, 12:-12], atol=1e-4, rtol=0)


def test_translations_shift_by_their_share_of_the_side_and_fill_grey(photos):
    shift = 9
    level = shift / (0.45 * SIZE)
    right = _one_op(photos, "translate_x", level)
    torch.testing.assert_close(right[..., shift:], photos[..., :-shift], atol=1e-4, rtol=0)
    torch.testing.assert_close(right[..., :shift], torch.full_like(right[..., :shift], 0.5))
    up = _one_op(photos, "translate_y", -level)
    torch.testing.assert_close(up[..., :-shift, :], photos[..., shift:, :], atol=1e-4, rtol=0)


def test_shear_x_keeps_the_centre_row(photos):
    odd = photos[..., : SIZE - 1, :]
    out = _one_op(odd, "shear_x", 1.0)
    centre = (SIZE - 2) // 2
    torch.testing.assert_close(out[..., centre, :], odd[..., centre, :], atol=1e-4, rtol=0)
    assert (out[..., 0, :] - odd[..., 0, :]).abs().max() > 0.1


def _torchvision_affine(images: torch.Tensor, name: str, level: float) -> dict:
    """TF.affine's arguments for each geometric op at ``level``: TF.affine turns clockwise on screen
    for a positive angle (as our positive rotations do) and shears by [[1, -tan(x)], [-tan(y), 1]]."""
    size = images.shape[-1]
    return {
        "rotate": dict(angle=30.0 * level),
        "shear_x": dict(shear=[-math.degrees(math.atan(0.3 * level)), 0.0]),
        "shear_y": dict(shear=[0.0, -math.degrees(math.atan(0.3 * level))]),
        "translate_x": dict(translate=[0.45 * level * size, 0.0]),
        "translate_y": dict(translate=[0.0, 0.45 * level * size]),
    }[name]


@pytest.mark.parametrize("level", [0.7, -0.4])
@pytest.mark.parametrize("name", ["rotate", "shear_x", "shear_y", "translate_x", "translate_y"])
def test_geometric_ops_match_torchvision_affine_inside_and_fill_exact_grey_outside(photos, name, level):
    options = dict(angle=0.0, translate=[0.0, 0.0], scale=1.0, shear=[0.0, 0.0],
                   interpolation=TF.InterpolationMode.BILINEAR)
    options.update(_torchvision_affine(photos, name, level))
    # Where a ones image warps to exactly 1 every bilinear tap is inside; where to 0, none is.
    # torchvision blends partly covered border pixels differently, so those are left out.
    coverage = TF.affine(torch.ones_like(photos), fill=0.0, **options)
    inside, outside = coverage == 1, coverage == 0
    assert inside.float().mean() > 0.3 and outside.any()
    expected = TF.affine(photos, fill=0.5, **options)
    out = _one_op(photos, name, level)
    torch.testing.assert_close(out[inside], expected[inside], atol=2e-5, rtol=0)
    assert torch.all(out[outside] == 0.5)


@pytest.mark.parametrize("name", ["rotate", "shear_x", "translate_y"])
def test_half_precision_geometric_ops_stay_close_to_float32(photos, name):
    half = _one_op(photos.half(), name, 0.6)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), _one_op(photos.half().float(), name, 0.6), atol=2e-3, rtol=0)


def test_solarize_inverts_pixels_at_and_above_the_threshold():
    # level 0.75 puts the threshold at exactly 0.25
    values = torch.tensor([0.0, math.nextafter(0.25, 0), 0.25, math.nextafter(0.25, 1), 0.6, 1.0])
    images = values.view(1, 1, 1, -1).expand(1, 3, 4, -1).contiguous()
    expected = torch.where(images >= 0.25, 1 - images, images)
    torch.testing.assert_close(_one_op(images, "solarize", 0.75), expected, atol=1e-7, rtol=0)


@pytest.mark.parametrize("level", [0.05, 0.3, 0.9])
def test_posterize_between_8_bit_levels_keeps_the_top_bits_of_the_rounded_level(level):
    images = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    bits = 8 - round(4 * level)
    if bits == 8:
        expected = images
    else:
        mask = 256 - 2 ** (8 - bits)
        expected = ((images * 255).round().to(torch.uint8) & mask).float() / 255
    torch.testing.assert_close(_one_op(images, "posterize", level), expected, atol=1e-6, rtol=0)


def test_equalize_matches_torchvision_on_flat_and_nearly_flat_channels(photos):
    images = (photos * 255).round() / 255
    images[0, 0] = 0.4
    images[1, 1] = 0.8
    images[1, 1, :2, :] = 0.2  # 96 pixels below the top level: fewer than 255, so PIL leaves it
    images[2, 2, :, : SIZE // 2] = 0.1  # two levels, half and half
    expected = TF.equalize((images * 255).round().to(torch.uint8)).float() / 255
    out = _one_op(images, "equalize", 1.0)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)
    assert torch.equal(out[1, 1], images[1, 1])


def test_mixed_ops_in_one_batch_equal_each_op_on_its_own(photos):
    names = ["rotate", "equalize", "identity", "translate_y"]
    levels = torch.tensor([0.3, 0.0, 0.0, -0.6])
    out = apply_ops(photos, torch.tensor([OPS.index(n) for n in names]), levels)
    for i, name in enumerate(names):
        alone = _one_op(photos[i:i + 1], name, float(levels[i]))
        torch.testing.assert_close(out[i:i + 1], alone, atol=1e-6, rtol=0)


def test_each_sample_draws_its_own_op_and_magnitude(photos):
    copies = photos[:1].expand(64, -1, -1, -1).contiguous()
    out = randaugment_batch(copies, depth=1, severity=9, generator=torch.Generator().manual_seed(3))
    changed = (out - copies).flatten(1).abs().amax(1) > 1e-4
    distinct = torch.unique(out.flatten(1), dim=0)
    # One magnitude per batch would allow at most 25 distinct results (identity, the two magnitude-free
    # ops, two signs of the other eleven); per-sample magnitudes leave repeats only from those
    # magnitude-free ops and posterize's few bit depths.
    assert 48 <= changed.sum() < 64
    assert len(distinct) >= 40


def test_same_generator_seed_gives_the_same_batch_and_another_seed_does_not(photos):
    def run(seed):
        return randaugment_batch(photos, depth=2, severity=9, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(run(7), run(7))
    assert not torch.equal(run(7), run(8))


def test_severity_scales_the_change(photos):
    copies = photos.repeat(8, 1, 1, 1)

    def mean_change(severity):
        out = randaugment_batch(copies, severity=severity, generator=torch.Generator().manual_seed(0))
        return (out - copies).abs().mean()
    assert mean_change(1) < mean_change(10)


def test_depth_zero_returns_the_input_and_dtypes_are_kept(photos):
    assert randaugment_batch(photos, depth=0) is photos
    half = randaugment_batch(photos.half(), depth=2, generator=torch.Generator().manual_seed(1))
    assert half.dtype == torch.float16 and half.shape == photos.shape


def test_uint8_images_are_read_as_x_over_255(photos):
    as_uint8 = (photos * 255).round().to(torch.uint8)
    out = randaugment_batch(as_uint8, depth=2, generator=torch.Generator().manual_seed(5))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, randaugment_batch(as_uint8 / 255, depth=2, generator=torch.Generator().manual_seed(5)))


@pytest.mark.parametrize("images, error, match", [
    (torch.zeros(2, 3, 8, 8, dtype=torch.int32), TypeError, "floating point in \\[0, 1\\] or uint8"),
    (torch.zeros(3, 8, 8), ValueError, "N x 3 x H x W"),
    (torch.zeros(2, 1, 8, 8), ValueError, "N x 3 x H x W"),
])
def test_bad_images_are_refused(images, error, match):
    with pytest.raises(error, match=match):
        randaugment_batch(images)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(depth=-1), ValueError, "depth"), (dict(depth=1.5), TypeError, "depth"), (dict(depth=True), TypeError, "depth"),
    (dict(severity=10.5), ValueError, "severity"), (dict(severity=-1), ValueError, "severity"),
    (dict(severity="9"), TypeError, "severity"),
])
def test_bad_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        randaugment_batch(torch.rand(2, 3, 8, 8), **kwargs)
    with pytest.raises(error, match=match):
        RandAugmentOptions(**kwargs)


def test_apply_ops_refuses_draws_that_do_not_fit_the_batch():
    images = torch.rand(2, 3, 8, 8)
    with pytest.raises(ValueError, match="ops"):
        apply_ops(images, torch.tensor([0]), torch.tensor([0.0, 0.0]))
    with pytest.raises(ValueError, match="indices into OPS"):
        apply_ops(images, torch.tensor([0, len(OPS)]), torch.tensor([0.0, 0.0]))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        apply_ops(images, torch.tensor([0, 1]), torch.tensor([0.0, 2.0]))
    with pytest.raises(TypeError, match="ops must be a CPU tensor"):
        apply_ops(images, [0, 1], torch.tensor([0.0, 0.0]))
    with pytest.raises(TypeError, match="ops must be int64 indices into OPS.*float32"):
        apply_ops(images, torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0]))
    with pytest.raises(TypeError, match=r"levels must be floats in \[-1, 1\].*int64"):
        apply_ops(images, torch.tensor([0, 1]), torch.tensor([0, 1]))
