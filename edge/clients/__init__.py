"""How other programs read a model: each known client's preprocessing (pycoral, MediaPipe) and Frigate's YOLO reader."""
