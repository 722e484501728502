"""The remedy ladder's tuning split (`TuningSplit`, every task's), classification's (the images `pipeline train`
set aside before training, or `pipeline import` from --val-data; for a run that set none aside, a seeded share of the
training split with views), and how a client is fed each scored image.

    tuning = tuning_split(run, seed)                 # images [n,S,S,3] by the pixel contract, truth, recipes
    picture = client_picture(tuning, i)              # what a client opens for scored image i
    pictures = ClientPictures(tuning)                # all of them, made one at a time

A run trained now sets a seeded share of its training data aside (`tuning_fraction`, recorded by identity in the
manifest like the held-out split): images from the held-out distribution that the model never trained on, scored
as they are, each once. A run trained before records none; its tuning split is drawn from the training split as
before, with views (crops, flips, exposure) that bring back the borderline answers a held-out image gets (on its
own training images a model agrees with itself too easily), and the ladder says so. Each scored image keeps its
recipe, so a client can be fed the same picture as it would feed a user's photo: the view's region of the original
at the original's resolution, which the client then fits to the input its own way. The split never holds a
held-out image (checked by bytes).
"""
from __future__ import annotations

import collections.abc
import io
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from pipeline.quant.calibration import balanced_sample

TUNING_SHARE = 0.25  # of the training split held back from calibration to choose a remedy on
TUNING_MIN = 20  # fewer tuning images than this cannot tell 98% agreement from 95%
TUNING_SEED_OFFSET = 7919  # the tuning draw uses another seed than the calibration draw
# Views of each tuning image (the image itself, then seeded crops, flips and exposure): the model has learned its
# training images, so on them alone int8 and float agree even when they part on new images; new views of them
# bring back the borderline answers a held-out image gets.
TUNING_VIEWS = 16  # 60 photos x 16 views = 960 scored: 4 views (240) could not tell 2 of 160 held-out misses from 5
SET_ASIDE_VIEWS = 1  # scored images per set-aside image (1: each as it is)


class TuningSplit(NamedTuple):
    positions: np.ndarray  # positions in the training split (what the calibration draw excludes)
    ids: List[str]  # the examples' identities, for the manifest
    images: np.ndarray  # uint8 [n,S,S,3], decoded by the run's pixel contract as parity decodes held-out images
    truth: object  # what the task scores against, one per scored image: class ids [n], or a detector's examples (boxes)
    seed: int
    train_count: int  # images in the training split it was drawn from (the calibration rungs calibrate on the rest)
    views: int = TUNING_VIEWS  # scored images per tuning image (the image itself first)
    originals: Tuple = ()  # the tuning images as stored (encoded bytes; uint8 pixels for digits), for the clients
    recipes: Tuple["View", ...] = ()  # per scored image, how it was made from its original (for the clients)
    set_aside: bool = False  # the images training set aside (never trained on); False: drawn from the training split
    from_val: bool = False  # set aside from an import's --val-data (its model may have trained on any --data image)

    def record(self) -> Dict[str, object]:
        source = SET_ASIDE_VAL if self.from_val else SET_ASIDE if self.set_aside else DRAWN
        return {"source": source, "images": len(self.ids), "views_per_image": self.views,
                "scored": len(self.images), "seed": self.seed, "ids": list(self.ids)}

    def describe(self) -> str:
        """The split in a few words, for the ladder's table."""
        if self.set_aside:
            where = "from --val-data" if self.from_val else "before training"
            return f"{len(self.ids)} images set aside {where} (never trained on, never held out)"
        views = f" x {self.views} views" if self.views > 1 else ""
        return f"{len(self.ids)} training images{views} (never the held-out ones)"


SET_ASIDE = "set aside before training"
SET_ASIDE_VAL = "set aside from --val-data"  # `pipeline import --val-data`
DRAWN = "train split"
# Said when a run predates the tuning split: what it is judged on instead, and how to get the better split.
DRAWN_NOTE = ("this run set no tuning split aside (trained before edgeflow did): the ladder judges on views of "
              "training images instead, which the model has seen; train it again for a split it never trained on")
# Said for an imported run with no tuning split (imported without --val-data, or before imports set one aside).
IMPORTED_NOTE = ("this imported run set no --val-data share aside: the ladder judges on --data images, any of which the "
                 "model may have trained on, so it can pass an export that loses on new images and `pipeline parity`'s "
                 "held-out gate is the verdict; import again with --val-data for a tuning split the model never trained on")


def drawn_note(run) -> str:
    """Why a tuning split drawn from the training data is a weaker judge, for this run."""
    return IMPORTED_NOTE if run.origin else DRAWN_NOTE


def tuning_count(train_count: int) -> int:
    """How many training images the tuning split takes; refused when too few would be left to calibrate on."""
    from pipeline.errors import DataError

    n = max(TUNING_MIN, int(round(train_count * TUNING_SHARE)))
    if n >= train_count:
        raise DataError(f"the training split has {train_count} images; the remedy ladder needs more than {n} "
                        "(a tuning split to choose on, and the rest to calibrate on)")
    return n


def tuning_split(run, seed: int) -> TuningSplit:
    """Classification's: the images training set aside, when it did (`set_aside_split`); else a seeded,
    class-balanced share of the training split, each image with seeded views. Refused if any is a held-out image."""
    from pipeline.data.identity import resolve_split

    source, positions = resolve_split(run, "tuning")
    if len(positions):
        return set_aside_split(run, source, positions)
    return drawn_split(run, seed)


def set_aside_split(run, source, positions: np.ndarray) -> TuningSplit:
    """The images `pipeline train` set aside, each scored once as parity scores a held-out image (by the run's pixel
    contract): they come from the held-out distribution, so they need no views. The calibration rungs calibrate on
    the whole training split, which holds none of them."""
    from pipeline.data.identity import resolve_split, tunes_on_val

    examples = [source.examples[i] for i in positions]
    _check_not_heldout(run, examples)
    originals = source.originals(positions)
    _, train = resolve_split(run, "train")
    seed = run.data.seed
    images, truth, recipes = _scored(run, originals, examples, SET_ASIDE_VIEWS, np.random.default_rng(seed + TUNING_SEED_OFFSET))
    return TuningSplit(np.zeros(0, np.int64), [e.id for e in examples], images, truth, seed, len(train),
                       views=SET_ASIDE_VIEWS, originals=tuple(originals), recipes=recipes, set_aside=True,
                       from_val=tunes_on_val(run))


def _scored(run, originals, examples, views: int, rng: np.random.Generator):
    """Each image decoded by the run's pixel contract, then `views - 1` seeded views of it: the scored images, their
    labels and their recipes."""
    contract, size = run.contract, run.image_size
    images, labels, recipes = [], [], []
    for k, (original, example) in enumerate(zip(originals, examples)):
        images.append(contract.load_pixels(original, (size, size), name=example.id))
        recipes.append(View(k))
        if views > 1:
            large = contract.load_pixels(original, (2 * size, 2 * size), name=example.id)
            for _ in range(views - 1):
                pixels, view = random_view(large, size, rng, k)
                images.append(pixels)
                recipes.append(view)
        labels += [example.label] * views
    return np.stack(images), np.array(labels, np.int64), tuple(recipes)


def _check_not_heldout(run, examples) -> None:
    from pipeline.data.identity import resolve_split
    from pipeline.errors import DataError

    heldout_source, heldout = resolve_split(run, "heldout")
    # By bytes: ids are relative to their own source, and a --val-data folder may reuse the training folder's names.
    held = {heldout_source.examples[i].digest for i in heldout}
    if any(e.digest in held for e in examples):  # the splits are disjoint by construction; checked, as it must hold
        raise DataError("a tuning image is also a held-out image; the held-out split must stay unseen by the remedy")


def drawn_split(run, seed: int) -> TuningSplit:
    """A run trained before the tuning split was set aside: a seeded, class-balanced share of the training split,
    each image with seeded views (`drawn_note`)."""
    from pipeline.data.identity import resolve_split

    source, train = resolve_split(run, "train")
    examples = [source.examples[i] for i in train]
    labels = np.array([e.label for e in examples], np.int64)
    n = tuning_count(len(examples))
    tuning_seed = seed + TUNING_SEED_OFFSET
    positions = np.sort(balanced_sample(labels, n, tuning_seed))
    chosen = [examples[p] for p in positions]
    _check_not_heldout(run, chosen)
    originals = source.originals(train[positions])
    images, truth, recipes = _scored(run, originals, chosen, TUNING_VIEWS, np.random.default_rng(tuning_seed))
    return TuningSplit(positions, [e.id for e in chosen], images, truth, tuning_seed, len(examples),
                       originals=tuple(originals), recipes=recipes)


class View(NamedTuple):
    """How one scored tuning image was made from its original, so a client can be fed the same picture."""

    original: int  # position in TuningSplit.originals
    box: Optional[Tuple[float, float, float, float]] = None  # (left, top, right, bottom) as shares of each side; None: whole
    flip: bool = False
    gain: float = 1.0  # exposure: pixel values times this, clipped to 0..255


def random_view(large: np.ndarray, size: int, rng: np.random.Generator, original: int = 0) -> Tuple[np.ndarray, View]:
    """A seeded crop (75-100% of each side), flip and exposure (x0.85-1.15) of `large` (the tuning split decodes
    its images at twice the size) resized to `size`, and its recipe."""
    from PIL import Image

    h, w = large.shape[:2]
    ch, cw = int(h * rng.uniform(0.75, 1.0)), int(w * rng.uniform(0.75, 1.0))
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    crop = Image.fromarray(large[y:y + ch, x:x + cw]).resize((size, size), Image.BILINEAR)
    flip = bool(rng.random() < 0.5)
    if flip:
        crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
    gain = float(rng.uniform(0.85, 1.15))
    view = View(original, (x / w, y / h, (x + cw) / w, (y + ch) / h), flip, gain)
    return np.clip(np.asarray(crop, np.float32) * gain, 0, 255).astype(np.uint8), view


def client_picture(tuning: TuningSplit, index: int, opened=None):
    """What a client opens for scored image `index`: the stored file itself for a whole-image view, else the
    view's region of the fully decoded original (a PIL image), flipped and exposed as the view was. A client then
    fits it to the input its own way, from the original's resolution, as it would a user's photo. `opened`: the
    original already decoded (`decoded`), when the caller keeps it."""
    from PIL import Image

    from edge.documents.bundle import image_file

    view = tuning.recipes[index]
    original = tuning.originals[view.original]
    if view.box is None and view.gain == 1.0 and not view.flip:
        return image_file(index, tuning.ids[view.original], original)[1]  # as parity ships a held-out image
    image = opened if opened is not None else decoded(original)
    if view.box is not None:
        left, top, right, bottom = view.box
        w, h = image.size
        image = image.crop((round(left * w), round(top * h), max(round(right * w), round(left * w) + 1),
                            max(round(bottom * h), round(top * h) + 1)))
    if view.flip:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    return Image.fromarray(np.clip(np.asarray(image, np.float32) * view.gain, 0, 255).astype(np.uint8))


def decoded(original):
    """A stored original (encoded bytes, or uint8 pixels) as a fully decoded RGB PIL image."""
    from PIL import Image

    image = Image.fromarray(original) if isinstance(original, np.ndarray) else Image.open(io.BytesIO(original))
    return image.convert("RGB")


class ClientPictures(collections.abc.Sequence):
    """The tuning views as the clients open them, made one at a time (each is a region at the original's
    resolution: thousands of them would not fit in memory together). The views of one original are consecutive,
    so its decoded image is kept until the next original's view is asked for."""

    def __init__(self, tuning: TuningSplit):
        self.tuning = tuning
        self._opened: Tuple[int, object] = (-1, None)

    def __len__(self) -> int:
        return len(self.tuning.recipes)

    def __getitem__(self, index: int):
        if not 0 <= index < len(self):
            raise IndexError(index)
        original = self.tuning.recipes[index].original
        if self._opened[0] != original:
            self._opened = (original, decoded(self.tuning.originals[original]))
        return client_picture(self.tuning, index, self._opened[1])
