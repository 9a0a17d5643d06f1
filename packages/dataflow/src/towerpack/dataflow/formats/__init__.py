"""Datasets on disk: LMDB, HDF5, npz, TFRecord, and the serializers that write them.

Read ``reader.py`` first (DatasetReader, the sharded sequential reader every format builds on), then
``serializers.py`` (save and load by format); ``errors.py`` holds the one error a damaged file gives.
"""
