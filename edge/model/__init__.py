"""The model file: reading the .tflite, its structural and quantization checks, its metadata, integrity, labels, sidecar,
and the interpreter made for it."""
