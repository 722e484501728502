"""Edge TPU helpers: the pre-flight mapping prediction and its rules, the compiler log reader, compiled-model checks."""
