"""The tiny pose model the pose head's tests read: three 64 px images, each one square with a coloured marker at each of
its 3 keypoints, trained 100 steps (once per test process) with BatchNorm statistics measured as training from scratch
measures them.

    items = tiny_items()                      # the fitted items: image, boxes, classes, mask, keypoints
    model, before, history = trained()       # the training model, its keypoint error before training, fit's history
    keypoint_error(model, items)              # mean pixel error of the best object's labelled keypoints
"""
from __future__ import annotations

import functools

import numpy as np

SIZE = 64  # the input side
K = 3  # keypoints: the square's top-left and top-right corners, the middle of its bottom edge
M = 4  # padded objects per image


def tiny_items():
    """Three images; the third image's third keypoint is not labelled (visibility 0, x = y = 0) though its marker is drawn."""
    items = []
    for n, (x0, y0, w, h) in enumerate(((8, 10, 30, 36), (28, 20, 30, 34), (14, 6, 40, 44))):
        image = np.full((SIZE, SIZE, 3), 30, np.uint8)
        image[y0:y0 + h, x0:x0 + w] = (220, 200, 60)
        keypoints = np.zeros((M, K, 3), np.float32)
        for k, (x, y) in enumerate(((x0 + 3, y0 + 3), (x0 + w - 3, y0 + 3), (x0 + w / 2, y0 + h - 3))):
            image[int(y) - 2:int(y) + 2, int(x) - 2:int(x) + 2] = ((255, 0, 0), (0, 0, 255), (0, 255, 0))[k]
            if not (n == 2 and k == 2):
                keypoints[0, k] = (x / SIZE, y / SIZE, 2)
        boxes = np.zeros((M, 4), np.float32)
        boxes[0] = (y0 / SIZE, x0 / SIZE, (y0 + h) / SIZE, (x0 + w) / SIZE)
        mask = np.zeros(M, bool)
        mask[0] = True
        items.append({"image": image, "boxes": boxes, "classes": np.zeros(M, np.int32), "mask": mask, "keypoints": keypoints})
    return items


def keypoint_error(model, items, training: bool = False) -> float:
    """Mean pixel distance of the labelled keypoints of each image's best-scoring object from where they are."""
    from pipeline.tasks.detect.infer import Nms
    from pipeline.tasks.pose.heads.yolo.infer import decode, kept

    out = model(np.stack([i["image"] for i in items]).astype(np.float32), training=training)
    boxes, scores, points = (t.numpy() for t in decode(out["box_dist"], out["class_logits"], out["keypoints"], SIZE))
    errors = []
    for b, s, p, item in zip(boxes, scores, points, items):
        best = kept(b, s, p, Nms(0.0, 0.5, 1)).keypoints[0]
        labelled = item["keypoints"][0, :, 2] > 0
        errors.append(np.linalg.norm((best[:, :2] - item["keypoints"][0, :, :2])[labelled] * SIZE, axis=-1))
    return float(np.concatenate(errors).mean())


@functools.lru_cache(maxsize=1)
def trained():
    """(the training model after 100 steps on tiny_items, its keypoint error before, fit's history); OKS sigmas 0.25."""
    import tensorflow as tf
    import tf_keras as keras

    from pipeline.tasks.pose.heads.yolo.model import build_pose_model
    from pipeline.tasks.pose.heads.yolo.trainer import training_model, with_truth
    from pipeline.training.batchnorm import Reestimator

    items = tiny_items()
    ds = tf.data.Dataset.from_tensor_slices({key: np.stack([i[key] for i in items]) for key in items[0]})
    ds = with_truth(ds).batch(3).map(lambda i, t: (tf.cast(i, tf.float32), t)).repeat()
    tf.keras.utils.set_random_seed(0)
    model = training_model(build_pose_model("small_cnn", SIZE, 1, K, head_width=16, width=8), [0.25] * K)
    before = keypoint_error(model, items)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(ds, steps_per_epoch=25, epochs=4, verbose=0).history
    Reestimator(model, tf.distribute.get_strategy(), ds, batches=2, global_batch=3)()
    return model, before, history
