"""DataFlows that run in one process: the protocol, sources, maps, batches, mixing, sharding."""
