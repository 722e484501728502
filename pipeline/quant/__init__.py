"""Quantization helpers: integer-only verification, the per-layer error report, quantization-aware training."""
