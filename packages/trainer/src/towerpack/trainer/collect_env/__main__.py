"""``python -m towerpack.trainer.collect_env``: the environment table, then the GPUs TensorFlow sees."""

from . import collect_env_info, tensorflow_gpus

print(collect_env_info())
print(tensorflow_gpus())
