"""What the port does to TensorFlow 1 code: imports to tf.compat.v1, tf.contrib to maintained homes,
the TF 1 names checked against the installed TensorFlow, float shape dimensions."""
