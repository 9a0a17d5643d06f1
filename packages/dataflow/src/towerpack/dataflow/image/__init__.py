"""Images: decoding (whole and cropped), image dataflows, the image LMDB recipe and its commands."""
