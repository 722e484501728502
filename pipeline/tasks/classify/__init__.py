"""Image classification: one label per image. The task (task.py) and its export, parity, predict, import, chance
level and per-class metrics beside it."""
