"""On-device decoding of each detector head's outputs (numpy only)."""
