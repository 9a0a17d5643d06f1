"""towerpack.launcher: spawn, connect and supervise one process per GPU, slot or host.

The `launch` command (:mod:`towerpack.launcher.cli`). Never imports TensorFlow.
"""
