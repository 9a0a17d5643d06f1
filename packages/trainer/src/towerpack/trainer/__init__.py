"""towerpack.trainer: the per-process TensorFlow graph-mode training loop."""
