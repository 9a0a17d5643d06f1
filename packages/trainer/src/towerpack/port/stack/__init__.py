"""What the port does about the stack around TF 1 code: names NumPy, SciPy, Pillow, OpenCV and Python
removed, rewritten where the replacement is exact and reported otherwise."""
