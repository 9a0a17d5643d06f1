"""towerpack.launcher: spawn, connect and supervise one process per GPU, slot or host. Never imports TensorFlow."""
