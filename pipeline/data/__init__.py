"""Data specs and TPU-ready input pipelines.

A data spec is one of:
  digits                      scikit-learn's 8x8 digits, shipped with the package (no download)
  'data/train-*.tfrec'        TFRecords in the Kaggle TPU flowers schema (tfrecords.py); local paths or gs://
  data/flowers/               a folder with one sub-folder of images per class

Every source becomes the same stream: (uint8 RGB image [S, S, 3], int32 label) in a fixed order
(examples.py, specs.py). Each example has an identity and a digest of its bytes; train records the
identities (manifest `data.identity`) and every later stage refuses data whose classes or examples
changed (identity.py). Decoding mirrors the pixel contract in pure TensorFlow (decode.py); feed.py
batches for training and evaluation. Data to predict on, without labels, is read by unlabeled.py.
"""
from pipeline.data.decode import TRAINING_CONTRACT, training_pixels
from pipeline.data.examples import SPLITS, Example, Source, Split, heldout_mask
from pipeline.data.feed import decoded_mb, eval_pipeline, to_numpy, training_pipeline
from pipeline.data.identity import identity_record, load_split, recorded_split, resolve_split
from pipeline.data.specs import open_source
from pipeline.data.tfrecords import LABELS_NAME, TFRECORD_FEATURES, encode_record

__all__ = ["TRAINING_CONTRACT", "Example", "LABELS_NAME", "SPLITS", "Source", "Split", "TFRECORD_FEATURES", "decoded_mb",
           "encode_record", "eval_pipeline", "heldout_mask", "identity_record", "load_split", "open_source", "recorded_split", "resolve_split",
           "to_numpy", "training_pipeline", "training_pixels"]
