"""The documents that cross between host and device: the bundle, the predictions and the latency, each with its writer
and reader (their one version check is edge/files/documents.py)."""
