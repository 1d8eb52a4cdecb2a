"""The data `pkmixer demo` trains on, and which: Fashion-MNIST whenever it can be had, Synthetic Shapes otherwise.

Fashion-MNIST is prepared once under a cache folder (:func:`demo_cache_dir`, ``fashion_mnist/``) by
:func:`~timm_pkmixer.data.fashion_mnist.prepare_fashion_mnist`: kept when it is already there, else from
Debian's ``dataset-fashion-mnist``, else by torchvision's download. The demo trains on a class-balanced subset (the
first images of each class of the training set; validation: the first of each class of the test set), the same for
every seed, so that seeds differ by training alone. *Synthetic Shapes* (four classes of 32×32 RGB shapes on a noisy
background) are drawn from the seed alone: the same seed writes the same images. An image folder must hold two
classes or more, the same in ``train/`` and ``validation/`` (a comparison of accuracies on one class compares
nothing); a prepared Fashion-MNIST is checked (:func:`~.fashion_mnist.check_fashion_mnist`) before it is read.
"""
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ['SHAPES', 'FASHION_PER_CLASS', 'SHAPES_PER_CLASS', 'DemoData', 'choose_demo_data', 'demo_cache_dir',
           'fashion_mnist_demo_data', 'shapes_demo_data', 'folder_demo_data', 'write_shapes_dataset',
           'find_fashion_mnist']

SHAPES = ('circle', 'cross', 'square', 'triangle')
CACHE_ENV = 'PKMIXER_CACHE_DIR'
# images per class: Fashion-MNIST's subset (train, validation) and the shapes' training set (a quarter as many to
# validate); sized so that the default demo takes about 2-3 minutes on one core
FASHION_PER_CLASS = (350, 200)
SHAPES_PER_CLASS = 300


@dataclass
class DemoData:
    """A demo's data: the datasets (timm's: ``.transform`` set by ``create_loader``), what the models take
    (classes, channels, mean, std) and how the training images are augmented (`create_loader` arguments), and one
    line saying what the data are and where they come from."""
    train: Any
    val: Any
    num_classes: int
    in_chans: int
    mean: Optional[Tuple[float, ...]]  # None: the model's own (its pretrained cfg)
    std: Optional[Tuple[float, ...]]
    augmentation: Dict[str, Any]
    says: str
    epochs: int = 15  # the demo's default on these data (about 2-3 minutes on one core, both models, two seeds)


def demo_cache_dir() -> Path:
    """``$PKMIXER_CACHE_DIR``, else ``$XDG_CACHE_HOME/timm_pkmixer``, else ``~/.cache/timm_pkmixer``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'timm_pkmixer'


def find_fashion_mnist(cache_dir: Path, download: bool = True) -> Tuple[Optional[Path], str]:
    """Fashion-MNIST prepared under ``cache_dir/fashion_mnist`` (kept if there, else from Debian's files or
    torchvision's download): (its root, where it came from), or (None, why it cannot be had)."""
    from ..errors import UserInputError
    from .fashion_mnist import prepare_fashion_mnist
    root = Path(cache_dir) / 'fashion_mnist'
    try:
        prepared = prepare_fashion_mnist(str(root), download=download)
    except (UserInputError, OSError) as e:
        return None, str(e)
    origin = {'already prepared': 'prepared earlier', 'debian': f"from Debian's {prepared.origin}",
              'torchvision download': f"downloaded by torchvision from {prepared.origin}"}.get(prepared.source,
                                                                                             prepared.origin)
    return prepared.root, f'{fashion_mnist_root_line(prepared.root)}, {origin}'


def fashion_mnist_root_line(root: Path) -> str:
    from .fashion_mnist import fashion_mnist_raw_dir
    return str(fashion_mnist_raw_dir(root))


class _ClassSubset:
    """The first `per_class` items of each class of a torchvision dataset, in the dataset's order (all of a class
    that holds fewer: `taken` says how many of each); its ``transform`` is the dataset's (what timm's
    ``create_loader`` sets)."""

    def __init__(self, dataset: Any, per_class: int):
        self.dataset = dataset
        self.per_class = per_class
        self.taken: Dict[int, int] = {}
        self.indices: List[int] = []
        for i, label in enumerate(int(t) for t in dataset.targets):
            if self.taken.get(label, 0) < per_class:
                self.taken[label] = self.taken.get(label, 0) + 1
                self.indices.append(i)

    def says(self, each: str, where: str) -> str:
        """``the first 350 EACH``, or what was taken where a class holds fewer: ``all 6000 EACH: 7000 asked, WHERE
        holds no more``."""
        counts = sorted(set(self.taken.values()))
        if counts == [self.per_class]:
            return f'the first {self.per_class} {each}'
        span = str(counts[0]) if len(counts) == 1 else f'{counts[0]}–{counts[-1]}'
        return f'all {span} {each}: {self.per_class} asked, {where} holds no more'

    @property
    def transform(self) -> Any:
        return self.dataset.transform

    @transform.setter
    def transform(self, value: Any) -> None:
        self.dataset.transform = value

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> Any:
        return self.dataset[self.indices[i]]


def fashion_mnist_demo_data(root: Path, train_per_class: int, val_per_class: int, origin: str) -> DemoData:
    """Fashion-MNIST from `root` (prepared), `train_per_class` / `val_per_class` images of each of its 10 classes
    (all of them where a class holds fewer: 6000 in training, 1000 in the test set; the line the demo prints says
    what was taken), at the packaged recipes' settings (32 px, grayscale, the training set's mean and std; random
    crop by timm's ``rkrr`` and horizontal flip, no colour jitter)."""
    from timm.data import create_dataset

    from .fashion_mnist import FASHION_MNIST_MEAN, FASHION_MNIST_STD
    train = _ClassSubset(create_dataset('torch/fashion_mnist', root=str(root), split='train'), train_per_class)
    val = _ClassSubset(create_dataset('torch/fashion_mnist', root=str(root), split='validation'), val_per_class)
    says = (f'Fashion-MNIST ({origin}): {len(train)} training images ({train.says("of each of its 10 classes", "it")}) '
            f'and {len(val)} validation images ({val.says("of each class of its test set", "the test set")}), 28 px '
            f'resized to 32')
    return DemoData(train, val, 10, 1, (FASHION_MNIST_MEAN,), (FASHION_MNIST_STD,),
                    dict(train_crop_mode='rkrr', hflip=0.5, color_jitter=0.), says, epochs=4)


def _noise_image(rng: random.Random, size: int):
    """Gaussian noise (mean 128, σ 24, as PIL's ``effect_noise``) drawn from `rng`: a function of the seed."""
    import numpy as np
    from PIL import Image
    gen = np.random.default_rng(rng.getrandbits(64))
    pixels = np.clip(gen.normal(128, 24, (size, size)).round(), 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, 'L').convert('RGB')


def _draw_shape(shape: str, rng: random.Random, size: int = 32):
    from PIL import Image, ImageDraw
    bg = tuple(rng.randrange(0, 120) for _ in range(3))
    fg = tuple(rng.randrange(135, 256) for _ in range(3))
    img = Image.new('RGB', (size, size), bg)
    draw = ImageDraw.Draw(img)
    r = rng.uniform(0.2, 0.38) * size
    cx, cy = rng.uniform(r, size - r), rng.uniform(r, size - r)
    if shape == 'circle':
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fg)
    elif shape == 'square':
        draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=fg)
    elif shape == 'triangle':
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=fg)
    else:
        w = max(2, int(r / 2.5))
        draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=fg)
        draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=fg)
    return Image.blend(img, _noise_image(rng, size), 0.15)


def write_shapes_dataset(root: str, train_per_class: int = 300, val_per_class: int = 75, seed: int = 0) -> str:
    """Write Synthetic Shapes as ``root/{train,validation}/<class>/<i>.png`` (a function of `seed`); returns `root`."""
    rng = random.Random(seed)
    for split, count in (('train', train_per_class), ('validation', val_per_class)):
        for shape in SHAPES:
            folder = os.path.join(root, split, shape)
            os.makedirs(folder, exist_ok=True)
            for i in range(count):
                _draw_shape(shape, rng).save(os.path.join(folder, f'{i:04d}.png'))
    return root


def _split_dir(root: str, names: Sequence[str]) -> str:
    for name in names:
        if os.path.isdir(os.path.join(root, name)):
            return os.path.join(root, name)
    raise FileNotFoundError(2, f'no {" or ".join(names)} folder in it', root)


def _image_folder(root: str, names: Sequence[str], split: str) -> Any:
    """timm's dataset of the split folder of `root` (the first of `names` there); a folder without images is an
    :class:`~timm_pkmixer.errors.InvalidArgumentError` naming it (timm's RuntimeError)."""
    from timm.data import create_dataset

    from ..errors import InvalidArgumentError
    folder = _split_dir(root, names)
    try:
        return create_dataset('', root=folder, split=split, is_training=split == 'train')
    except RuntimeError as e:  # timm: 'Found 0 images in subfolders of …'
        raise InvalidArgumentError(f'data_dir {root}: {" ".join(str(e).split())}') from None


def _check_classes(root: str, train: Any, val: Any) -> None:
    """Two classes or more, the same in both splits: a comparison of accuracies on one class compares nothing (both
    models are right every time), and a class one split lacks shifts the labels of the other (timm numbers each
    split's class folders by their sorted names)."""
    from ..errors import InvalidArgumentError
    classes, val_classes = list(train.reader.class_to_idx), list(val.reader.class_to_idx)
    if len(classes) < 2:
        raise InvalidArgumentError(f'data_dir {root}: its training images are of one class ({", ".join(classes)}): '
                                   f'comparing two models needs two classes or more')
    if val_classes != classes:
        missing = sorted(set(classes) - set(val_classes))
        extra = sorted(set(val_classes) - set(classes))
        which = '; '.join(filter(None, [f'validation lacks {", ".join(missing)}' if missing else '',
                                        f'only validation has {", ".join(extra)}' if extra else '']))
        raise InvalidArgumentError(f'data_dir {root}: its training and validation classes differ ({which}): the '
                                   f'labels of the two would not match')


def folder_demo_data(root: str, says: str) -> DemoData:
    """An ImageFolder with ``train/`` and ``validation/`` (or ``val/``) of the same two classes or more, RGB, at the
    model's input size, mean and std; random-resized crop (scale 0.6 … 1) and flip."""
    train = _image_folder(root, ('train',), 'train')
    val = _image_folder(root, ('validation', 'val'), 'validation')
    _check_classes(root, train, val)
    return DemoData(train, val, len(train.reader.class_to_idx), 3, None, None, dict(scale=(0.6, 1.0), hflip=0.5),
                    f'{says}: {len(train)} training and {len(val)} validation images')


def shapes_demo_data(root: str, train_per_class: int, seed: int, why: str) -> DemoData:
    """Synthetic Shapes written into `root` from `seed`; `why` says why not Fashion-MNIST."""
    val_per_class = max(1, train_per_class // 4)
    write_shapes_dataset(root, train_per_class=train_per_class, val_per_class=val_per_class, seed=seed)
    return folder_demo_data(root, f'Synthetic Shapes ({", ".join(SHAPES)}; 32x32 RGB, drawn from seed {seed}) '
                                  f'in {root} ({why})')


def choose_demo_data(data: str, data_dir: Optional[str], keep_data: Optional[str], tmp: str, seed: int,
                     train_per_class: Optional[int] = None, val_per_class: Optional[int] = None,
                     cache_dir: Optional[str] = None, download: bool = True) -> DemoData:
    """The demo's data: `data_dir` (an ImageFolder, or a prepared Fashion-MNIST), else Fashion-MNIST from the cache
    (`data` ``auto`` or ``fashion-mnist``), else Synthetic Shapes written into `keep_data` or `tmp` (``auto`` when
    Fashion-MNIST cannot be had, ``shapes``). Images per class: `train_per_class` and `val_per_class` (Fashion-MNIST's
    subset; default :data:`FASHION_PER_CLASS`) or `train_per_class` (the shapes, validated on a quarter as many)."""
    from ..errors import InvalidArgumentError
    from .fashion_mnist import FASHION_MNIST_FILES, check_fashion_mnist, fashion_mnist_raw_dir
    fashion = (train_per_class or FASHION_PER_CLASS[0], val_per_class or FASHION_PER_CLASS[1])
    if data_dir is not None:
        raw = fashion_mnist_raw_dir(Path(data_dir))
        if any(os.path.lexists(raw / f) for f in FASHION_MNIST_FILES):
            check_fashion_mnist(Path(data_dir))  # one missing, cut short, a FIFO: named, before torchvision reads
            return fashion_mnist_demo_data(Path(data_dir), *fashion, f'prepared in {raw}')
        return folder_demo_data(data_dir, f'the image folder {data_dir}')
    why = 'asked for'
    if data != 'shapes' and keep_data is None:
        root, origin = find_fashion_mnist(Path(cache_dir) if cache_dir else demo_cache_dir(), download)
        if root is not None:
            return fashion_mnist_demo_data(root, *fashion, origin)
        if data == 'fashion-mnist':
            raise InvalidArgumentError(f'data: Fashion-MNIST cannot be had here: {origin}')
        why = f'Fashion-MNIST cannot be had here: {origin}'
    elif keep_data is not None:
        why = 'keep_data writes them'
    return shapes_demo_data(keep_data or tmp, train_per_class or SHAPES_PER_CLASS, seed, why)
