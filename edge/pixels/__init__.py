"""Pixels: the pixel contract as one value, decoding and resizing, and which files are images."""
