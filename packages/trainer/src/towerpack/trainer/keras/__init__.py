"""towerpack.trainer.keras: tf-keras (Keras 2) models in every trainer (the reference's
``tensorpack.contrib.keras``).

- ``KerasModel(get_model, input_signature, target_signature, input, trainer)
  .compile(optimizer, loss, metrics).fit(validation_data=..., ...)``: the Keras-style front end;
- ``setup_keras_trainer``: the same on a trainer you drive yourself;
- ``KerasModelCaller``: a Keras model inside your own tower function (ModelDesc.build_graph);
- ``KerasPhaseCallback``: feeds Keras's learning phase to models called without it.

Needs the ``tf_keras`` package: see docs/keras.md for installing it next to tensorflow-cpu.
"""

from .caller import KerasModelCaller
from .model import KerasModel
from .phase import KerasPhaseCallback
from .training import setup_keras_trainer

__all__ = ["KerasModel", "KerasModelCaller", "KerasPhaseCallback", "setup_keras_trainer"]
