"""Files and workers: the atomic writer, bounded reads, confined paths, where a command may write, decode-ahead and
worker counts."""
