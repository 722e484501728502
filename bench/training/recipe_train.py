"""The Kaggle TPU flowers recipe, written by hand: what a user compares `pipeline train` with.

    .venv/bin/python bench/training/recipe_train.py --data 'DIR/*.tfrec' --heldout 'HELDOUT/*.tfrec' --epochs 10 --out RUN

Kaggle-schema TFRecords -> parse, decode, resize, shuffle, batch, prefetch(AUTOTUNE) -> tf-keras
MobileNetV2 (alpha 0.35, 96 px, from scratch, global average pooling, dropout 0.2, softmax) under the
default strategy -> model.fit with the tutorial's warm-up/decay learning rate -> SavedModel. No
validation while training (the tutorial's is optional); trains on every record of --data. Then
one held-out evaluation on --heldout (shards the training never saw) and one line of JSON on stdout
with its accuracy. Nothing of the project is imported: only TensorFlow and tf-keras.
"""
from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

AUTO = tf.data.AUTOTUNE
FEATURES = {"image": tf.io.FixedLenFeature([], tf.string), "class": tf.io.FixedLenFeature([], tf.int64)}


def load(files, size: int, ordered: bool) -> tf.data.Dataset:
    def read(record):
        example = tf.io.parse_single_example(record, FEATURES)
        image = tf.image.decode_jpeg(example["image"], channels=3)
        image = tf.image.resize(image, [size, size])  # float32 0..255
        return image, tf.cast(example["class"], tf.int32)

    ds = tf.data.TFRecordDataset(files, num_parallel_reads=AUTO)
    if not ordered:
        options = tf.data.Options()
        options.deterministic = False
        ds = ds.with_options(options)
    return ds.map(read, num_parallel_calls=AUTO)


def learning_rate(epoch: int) -> float:
    # The tutorial's schedule: linear warm-up, sustain, exponential decay.
    start, top, floor, ramp, sustain, decay = 1e-4, 4e-3, 1e-5, 1, 1, 0.8
    if epoch < ramp:
        return start + (top - start) * epoch / ramp
    if epoch < ramp + sustain:
        return top
    return floor + (top - floor) * decay ** (epoch - ramp - sustain)


def build(size: int, classes: int, alpha: float) -> keras.Model:
    inputs = keras.Input((size, size, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1)(inputs)
    base = keras.applications.MobileNetV2(input_shape=(size, size, 3), alpha=alpha, include_top=False, weights=None)
    x = keras.layers.GlobalAveragePooling2D()(base(x))
    x = keras.layers.Dropout(0.2)(x)
    return keras.Model(inputs, keras.layers.Dense(classes, activation="softmax")(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--heldout", required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=96)
    parser.add_argument("--alpha", type=float, default=0.35)
    parser.add_argument("--classes", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    keras.utils.set_random_seed(args.seed)
    files = sorted(tf.io.gfile.glob(args.data))
    count = sum(1 for _ in tf.data.TFRecordDataset(files))  # the tutorial counts from the file names
    train = (load(files, args.image_size, ordered=False).repeat().shuffle(2048)
             .batch(args.batch_size, drop_remainder=True).prefetch(AUTO))
    model = build(args.image_size, args.classes, args.alpha)
    model.compile(optimizer=keras.optimizers.Adam(), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(train, epochs=args.epochs, steps_per_epoch=count // args.batch_size, verbose=2,
                        callbacks=[keras.callbacks.LearningRateScheduler(learning_rate)])
    model.save(args.out, save_format="tf")
    heldout = load(sorted(tf.io.gfile.glob(args.heldout)), args.image_size, ordered=True).batch(args.batch_size).prefetch(AUTO)
    loss, accuracy = model.evaluate(heldout, verbose=0)
    print(json.dumps({"heldout_accuracy": float(accuracy), "heldout_loss": float(loss),
                      "final_train_accuracy": float(history.history["accuracy"][-1]), "train_examples": count}))


if __name__ == "__main__":
    main()
