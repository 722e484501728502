"""A tiny stand-in pose head for the task's tests, behind the heads' interface (pipeline/tasks/pose/heads/): one pose
per image regressed from a global pool, trained by mean squared error on each image's first object. It proves the task's
plumbing (plan, build, batches, evaluate, record), never a model's quality; the real head's tests are under heads/."""
from __future__ import annotations

import io
import sys
import types

import numpy as np

NAME = "standin"


class StandinHead:
    name = NAME

    def strides(self):
        return (8,)

    def build(self, config, num_classes, sigmas, imagenet):
        import tensorflow as tf
        import tf_keras as keras

        k = len(sigmas)

        class Training(keras.Model):
            def train_step(self, data):
                images, truth = data
                with tf.GradientTape() as tape:
                    loss = self._loss(images, truth, True)
                grads = tape.gradient(loss, self.trainable_variables)
                self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
                return {"loss": loss}

            def test_step(self, data):
                return {"loss": self._loss(*data, False)}

            def _loss(self, images, truth, training):
                out = self(images, training=training)["pose"]
                wanted = tf.concat([truth["boxes"][:, 0], tf.reshape(truth["keypoints"][:, 0, :, :2], [-1, 2 * k])], -1)
                return tf.reduce_mean(tf.square(out - wanted))

        inputs = keras.Input((config.size, config.size, 3))
        x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
        x = keras.layers.Conv2D(8, 3, strides=4, activation="relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
        out = keras.layers.Dense(4 + 2 * k, activation="sigmoid", name="pose")(x)
        return Training(inputs, {"pose": out})

    def with_targets(self, config, ds):
        return ds.map(lambda item: (item["image"], {"boxes": item["boxes"], "keypoints": item["keypoints"]}))

    def predict(self, model, examples, config, nms):
        from PIL import Image

        from pipeline.tasks.pose.poses import Poses

        pixels = np.stack([np.asarray(Image.open(io.BytesIO(e.image)).convert("RGB").resize((config.size, config.size)),
                                      np.float32) for e in examples])
        out = np.asarray(model(pixels, training=False)["pose"])
        found = []
        for row in out:
            points = np.concatenate([row[4:].reshape(-1, 2), np.ones((len(row[4:]) // 2, 1))], -1).astype(np.float32)
            found.append(Poses(row[None, :4].astype(np.float32), np.zeros(1, np.int32), np.ones(1, np.float32), points[None]))
        return found

    def outputs(self):
        return {"pose": "[B, 4 + 2K] one box and its keypoints (the test's stand-in)"}

    def record(self, config, common):
        return {**common, "head": self.name}


def installed(monkeypatch):
    """Make `pipeline.tasks.pose.heads` this stand-in's registry for the test (whether or not the real one is there)."""
    import pipeline.tasks.pose as pose

    head = StandinHead()
    module = types.ModuleType("pipeline.tasks.pose.heads")
    module.NAMES, module.DEFAULT = (NAME,), NAME
    module.get = lambda name: head
    module.of_run = lambda run: head
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(pose, "heads", module, raising=False)
    return head
