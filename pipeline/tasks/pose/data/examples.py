"""The in-memory form of a pose data set: detection's examples (pipeline/tasks/detect/data/examples.py) with each
object's keypoints, and the keypoint layout every object of the set shares.

A `PoseExample` is a DetExample's fields (in its order, so detection's box scoring reads it as one) plus, per object,
keypoints float32 [n, K, 3] as (x, y, visibility): x and y normalized to the image, visibility COCO's 0 (not
labelled; x = y = 0), 1 (labelled, hidden) or 2 (labelled, visible); `num_keypoints`, the labelled ones as COCO counts
them; and `areas`, the object's area in pixels as OKS scales by it (COCO's own `area` where the data gives one, else
the box's).
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from pipeline.errors import DataError
from pipeline.tasks.detect.data.examples import EDGE_TOLERANCE, DetExample, DetSource

# COCO's person keypoints, their skeleton (0-based) and per-keypoint OKS sigmas, as COCO's keypoint evaluation
# defines them (pycocotools' COCOeval carries the same sigmas as its default).
COCO_PERSON = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
               "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
               "right_knee", "left_ankle", "right_ankle")
COCO_SIGMAS = (.026, .025, .025, .035, .035, .079, .079, .072, .072, .062, .062, .107, .107, .087, .087, .089, .089)
# A layout that brings no sigmas gets one for every keypoint: the mean of COCO's person sigmas, a keypoint as hard to
# place as COCO's average one (Ultralytics' 1/K instead grows more lenient as K shrinks).
DEFAULT_SIGMA = round(float(np.mean(COCO_SIGMAS)), 4)
VISIBILITIES = (0, 1, 2)


class KeypointLayout(NamedTuple):
    """What every object's K keypoints are: their names, the skeleton's bones (0-based pairs), the keypoint each one
    becomes in a mirrored image (flip_idx), the OKS sigmas and where they came from."""

    names: Tuple[str, ...]
    skeleton: Tuple[Tuple[int, int], ...]
    flip_idx: Tuple[int, ...]
    sigmas: Tuple[float, ...]
    sigmas_source: str  # "coco" (COCO's person sigmas), "data" (the data's own), "default" (DEFAULT_SIGMA each)

    @property
    def count(self) -> int:
        return len(self.names)

    def as_dict(self) -> Dict[str, object]:
        return {"count": self.count, "names": list(self.names), "skeleton": [list(b) for b in self.skeleton],
                "flip_idx": list(self.flip_idx), "sigmas": list(self.sigmas), "sigmas_source": self.sigmas_source}

    @classmethod
    def from_dict(cls, d: dict) -> "KeypointLayout":
        return cls(tuple(d["names"]), tuple(tuple(b) for b in d["skeleton"]), tuple(d["flip_idx"]),
                   tuple(float(s) for s in d["sigmas"]), d["sigmas_source"])


def layout(names: Sequence[str], skeleton: Sequence[Sequence[int]] = (), flip_idx: Optional[Sequence[int]] = None,
           sigmas: Optional[Sequence[float]] = None, where: str = "the data") -> KeypointLayout:
    """A checked layout. flip_idx not given: derived from the names (left_* <-> right_*, the rest stay). sigmas not
    given: COCO's for COCO's 17 person keypoints, else DEFAULT_SIGMA each."""
    names = tuple(str(n) for n in names)
    k = len(names)
    if k < 1:
        raise DataError(f"{where}: no keypoints; expected a keypoint layout of at least one keypoint")
    flips = tuple(flip_idx) if flip_idx is not None else flip_by_name(names)
    check_flip_idx(flips, k, where)
    bones = []
    for bone in skeleton:
        if not (len(bone) == 2 and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and 0 <= i < k for i in bone)):
            raise DataError(f"{where}: skeleton bone {list(bone)!r}; expected a pair of keypoint indices 0..{k - 1}")
        bones.append((int(bone[0]), int(bone[1])))
    if sigmas is not None:
        values = [s for s in sigmas]
        if len(values) != k or not all(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 for s in values):
            raise DataError(f"{where}: sigmas {list(values)[:20]!r}; expected {k} positive numbers, one per keypoint")
        return KeypointLayout(names, tuple(bones), tuple(int(i) for i in flips), tuple(float(s) for s in values), "data")
    if names == COCO_PERSON:
        return KeypointLayout(names, tuple(bones), tuple(int(i) for i in flips), COCO_SIGMAS, "coco")
    return KeypointLayout(names, tuple(bones), tuple(int(i) for i in flips), (DEFAULT_SIGMA,) * k, "default")


def flip_by_name(names: Sequence[str]) -> Tuple[int, ...]:
    """Each keypoint's mirror by name: 'left' and 'right' swapped (left_eye <-> right_eye); one without a partner
    mirrors to itself."""
    index = {n: i for i, n in enumerate(names)}

    def mirror(name: str) -> str:
        return name.replace("left", "\0").replace("right", "left").replace("\0", "right")

    return tuple(index.get(mirror(n), i) for i, n in enumerate(names))


def check_flip_idx(flip_idx: Sequence, k: int, where: str) -> None:
    values = list(flip_idx)
    if len(values) != k:
        raise DataError(f"{where}: flip_idx has {len(values)} entries; expected {k}, one per keypoint")
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in values) or sorted(values) != list(range(k)):
        raise DataError(f"{where}: flip_idx {values!r} is not a permutation of 0..{k - 1}; expected each keypoint's "
                        "mirror, every index once")


class PoseExample(NamedTuple):
    id: str
    image: bytes
    digest: str
    height: int
    width: int
    boxes: np.ndarray  # float32 [n, 4] normalized ymin, xmin, ymax, xmax
    classes: np.ndarray  # int32 [n]
    crowd: np.ndarray = np.zeros((0, 4), np.float32)
    crowd_classes: np.ndarray = np.zeros((0,), np.int32)
    keypoints: np.ndarray = np.zeros((0, 0, 3), np.float32)  # float32 [n, K, 3]: x, y normalized, visibility 0/1/2
    num_keypoints: np.ndarray = np.zeros((0,), np.int32)  # int32 [n]: keypoints labelled (visibility > 0)
    areas: np.ndarray = np.zeros((0,), np.float32)  # float32 [n]: pixels, what OKS scales by


class PoseSource(NamedTuple):
    spec: str
    kind: str  # coco | yolo | figures
    labels: List[str]
    examples: List[PoseExample]
    layout: KeypointLayout

    indices = DetSource.indices  # which examples are held out: by identity, as detection's


def checked_keypoints(values, k: int, height: int, width: int, where: str) -> np.ndarray:
    """One object's K keypoints, given as (x, y, v) normalized to the image: the count, visibility 0/1/2 and every
    labelled keypoint inside the image (within detection's edge tolerance, then clipped) checked; unlabelled ones
    become (0, 0, 0)."""
    flat = np.asarray(values, np.float64).reshape(-1)
    if flat.size != 3 * k:
        raise DataError(f"{where}: {flat.size / 3:g} keypoints ({flat.size} numbers); expected {k}, the layout's count")
    points = flat.reshape(k, 3)
    out = np.zeros((k, 3), np.float32)
    for i, (x, y, v) in enumerate(points):
        if v not in VISIBILITIES:
            raise DataError(f"{where}: keypoint {i} has visibility {v:g}; expected 0 (not labelled), 1 (hidden) or 2 (visible)")
        if v == 0:
            continue
        if not (np.isfinite(x) and np.isfinite(y)):
            raise DataError(f"{where}: keypoint {i} is not finite; expected numbers")
        if min(x, y) < -EDGE_TOLERANCE or max(x, y) > 1 + EDGE_TOLERANCE:
            raise DataError(f"{where}: keypoint {i} at ({x * width:.1f}, {y * height:.1f}) px lies outside the "
                            f"{width}x{height} image; expected every labelled keypoint inside it")
        out[i] = (min(max(x, 0.0), 1.0), min(max(y, 0.0), 1.0), v)
    return out


def pose_example(det: DetExample, keypoints: Sequence, k: int, where: Sequence[str], areas: Sequence = (),
                 counted: Sequence = ()) -> PoseExample:
    """A DetExample with its objects' keypoints (each (x, y, v) rows normalized), checked; `where[i]` names object i.
    `areas` (pixels, None where not given) default to the boxes'; `counted` (the data's num_keypoints, None where not
    given) must be the labelled count."""
    if len(keypoints) != len(det.boxes):
        raise DataError(f"{det.id}: {len(keypoints)} objects with keypoints for {len(det.boxes)} boxes; expected one each")
    points = np.stack([checked_keypoints(p, k, det.height, det.width, w) for p, w in zip(keypoints, where)]) \
        if len(keypoints) else np.zeros((0, k, 3), np.float32)
    labelled = (points[..., 2] > 0).sum(axis=1).astype(np.int32)
    for i, given in enumerate(counted):
        if given is not None and int(given) != labelled[i]:
            raise DataError(f"{where[i]}: num_keypoints {given} but {labelled[i]} keypoints are labelled (visibility "
                            "1 or 2); expected them to agree")
    box = (det.boxes[:, 2] - det.boxes[:, 0]) * det.height * (det.boxes[:, 3] - det.boxes[:, 1]) * det.width
    given = list(areas) + [None] * (len(box) - len(areas))
    area = np.array([b if a is None else a for a, b in zip(given, box)], np.float32)
    return PoseExample(*det, keypoints=points, num_keypoints=labelled, areas=area)
