"""DataFlows in one process: the protocol, sources, maps, batches, mixing, stream transforms, sharding.

Read ``base.py`` first (the DataFlow protocol every stage implements), then ``sharding.py`` (which
part of an epoch each rank and worker reads) and ``sources.py``.
"""
