"""Host side of the training-to-edge pipeline: train, export, compile, parity.

Every stage reads and writes one run directory; `pipeline/rundir/` (`Run`, its manifest and its files) is the
contract between them.
"""
