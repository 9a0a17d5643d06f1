"""Datasets on disk: LMDB, HDF5, npz, TFRecord, and the serializers that write them."""
