"""Answers: the runner (the one opening policy and score loop), classification, detection and its per-head decoders,
metrics, `edge evaluate` and `edge bench`."""
