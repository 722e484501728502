"""What `pipeline import` (pipeline/import_model.py) shares between tasks: one reader per model format (Keras,
SavedModel, ONNX), the input contract, the wrapper behind the pixel contract, the reference and the tuning share."""
