"""Running a dataflow in several workers (processes over ZMQ, or threads) and merging their output."""
