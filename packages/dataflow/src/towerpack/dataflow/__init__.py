"""towerpack.dataflow: Python data pipelines with ZMQ multi-process prefetch. Never imports TensorFlow."""
