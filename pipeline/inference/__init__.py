"""Models answering many images, and what is made of the answers: the SavedModel in padded batches under a
tf.distribute strategy (batched.py), the TFLite models one image at a time as the device runs them
(device.py), the files `pipeline predict` writes (output.py), and per-class precision, recall and F1 for
train's and parity's reports (class_metrics.py)."""
