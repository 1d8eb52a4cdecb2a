"""Datasets for train.py (`timm_pkmixer.experiments.datasets`): an image folder as timm reads it, as `pkmixer
prepare-stl10` writes it."""
import pytest
import timm
from PIL import Image

from timm_pkmixer.experiments.datasets import export_image_folder


def test_export_image_folder_is_readable_by_timm(tmp_path):
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    samples = [(Image.new('RGB', (96, 96), colours[i % 3]), i % 3) for i in range(7)]
    counts = export_image_folder(samples, ['airplane', 'bird', 'car'], tmp_path / 'train')
    assert counts == {'airplane': 3, 'bird': 2, 'car': 2}
    ds = timm.data.create_dataset('', root=str(tmp_path), split='train')
    assert len(ds) == 7 and ds.reader.class_to_idx == {'airplane': 0, 'bird': 1, 'car': 2}
    image, label = ds[0]
    assert image.size == (96, 96) and label == 0 and image.getpixel((0, 0)) == (255, 0, 0)
    with pytest.raises(ValueError, match='sample 0 has label 5, outside the 3 classes'):
        export_image_folder([(samples[0][0], 5)], ['a', 'b', 'c'], tmp_path / 'bad')
