"""Object detection: boxes and classes per image. The task (task.py) and its export, parity, predict, tuning and
import beside it; its data readers in data/; its detector heads, one folder each, in heads/."""
