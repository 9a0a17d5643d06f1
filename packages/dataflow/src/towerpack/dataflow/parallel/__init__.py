"""Running a dataflow in several workers (processes over ZMQ, or threads) and merging their output.

Read ``runners.py`` first (MultiProcessRunnerZMQ, MultiThreadRunner), then ``maps.py`` (the parallel
maps); ``workers.py`` and ``process.py`` hold the life of the worker processes.
"""
