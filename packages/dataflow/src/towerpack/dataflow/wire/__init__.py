"""The wire: the datapoint codec, control messages, credit between producers and consumers, security,
and what a process sets so that the transport stays cheap (``allocator``, ``release``).

Read ``codec.py`` first: the one place datapoints become frames and frames from a peer are validated.
Nothing here imports the rest of the dataflow, so every other folder can build on it.
"""
