"""Quantization: conversion, calibration, integer-only verification, the per-layer error report, quantization-aware
training (and the seeded views its distillation trains on)."""
