"""The wire: the datapoint codec, control messages, credit between producers and consumers, security."""
