"""Session creators: how a trainer or predictor gets its session (the reference's ``sesscreate``)."""

from __future__ import annotations

from .compat import tf, tfv1

__all__ = ["NewSessionCreator", "default_session_config"]


def default_session_config() -> tfv1.ConfigProto:
    """Soft placement and on-demand GPU memory: what a training process usually wants."""
    config = tfv1.ConfigProto(allow_soft_placement=True)
    config.gpu_options.allow_growth = True
    return config


class NewSessionCreator(tfv1.train.SessionCreator):
    """Creates a session and runs the variable and table initializers."""

    def __init__(self, target: str = "", config: tfv1.ConfigProto | None = None):
        self.target = target
        self.config = config if config is not None else default_session_config()

    def create_session(self):
        init = tf.group(
            tfv1.global_variables_initializer(),
            tfv1.local_variables_initializer(),
            tfv1.tables_initializer(),
            name="towerpack_init",
        )
        sess = tfv1.Session(target=self.target, config=self.config)
        sess.run(init)
        return sess
