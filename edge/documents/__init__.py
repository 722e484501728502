"""The documents that cross between host and device (bundle, predictions, latency) and the one check of their schema version."""
