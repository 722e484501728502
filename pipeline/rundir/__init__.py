"""The run directory: its manifest, its files, written atomically (the interface between stages)."""
