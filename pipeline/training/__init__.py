"""Training helpers: the tf.distribute strategy, the learning-rate schedule, freezing for transfer learning."""
