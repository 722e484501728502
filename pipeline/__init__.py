"""Host side of the training-to-edge pipeline: train, export, compile, parity.

Every stage reads and writes one run directory; `pipeline.manifest` is the contract between them.
"""
