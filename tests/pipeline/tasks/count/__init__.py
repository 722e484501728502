"""A third task, from outside pipeline/: counting the squares in a picture (a regression), on a small synthetic data
set made here. tests/pipeline/tasks/test_new_task.py registers it (tasks.register) and runs every stage on it: the
proof that a new task is a folder."""
