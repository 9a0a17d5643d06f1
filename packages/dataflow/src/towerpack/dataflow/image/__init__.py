"""Images: decoding (whole and cropped), image dataflows, the image LMDB recipe and its commands.

Read ``decode.py`` first (the one place encoded images become arrays), then ``dataflows.py``
(ImageFromFile, AugmentImage*); ``lmdb_recipe.py`` is the efficient-dataflow recipe end to end.
"""
