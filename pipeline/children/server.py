"""What the fork server of pipeline/children/child.py imports once for every child it forks: TensorFlow and Keras (about
10 s), and the export stage. TensorFlow is imported as quietly as the command that started the server is
(pipeline/console.py: a quiet command has set TF_CPP_MIN_LOG_LEVEL to 3 before the server starts), so the children
print no more of TensorFlow than the command does.
"""
import os

from pipeline import console

console.configure(verbose=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() != "3")

import tensorflow  # noqa: E402,F401  (imported here so that no child imports it again)
import tf_keras  # noqa: E402,F401

import pipeline.tasks.classify.export  # noqa: E402,F401
