"""Models answering many images, and what is made of the answers: the SavedModel in padded batches under a
tf.distribute strategy (batched.py), per-class precision, recall and F1 for train's and parity's reports
(class_metrics.py), parity's summary table, report.md and plot (parity_report.py), the evaluation bundle
gathered from a run for the device (bundle.py; its files are edge/documents/bundle.py's), and the files `pipeline
predict` writes (output.py)."""
