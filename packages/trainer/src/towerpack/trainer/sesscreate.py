"""Session creators: how a trainer or predictor gets its session (the reference's ``sesscreate``).

A creator returns a session whose variables are initialized, and leaves the graph unfinalized.
``NewSessionCreator`` opens one; ``ReuseSessionCreator`` hands over one the caller has;
``SessionCreatorAdapter`` passes another creator's session through a function (to wrap it).
"""

from __future__ import annotations

from .compat import tf, tfv1
from .cpu_kernels import with_cpu_layout_conversion

__all__ = ["NewSessionCreator", "ReuseSessionCreator", "SessionCreatorAdapter", "default_session_config"]


def default_session_config() -> tfv1.ConfigProto:
    """Soft placement and on-demand GPU memory: what a training process usually wants. Where oneDNN
    is off and there is no GPU, also Grappler's NCHW-to-NHWC conversion on the CPU (cpu_kernels.py)."""
    config = tfv1.ConfigProto(allow_soft_placement=True)
    config.gpu_options.allow_growth = True
    return with_cpu_layout_conversion(config)


class NewSessionCreator(tfv1.train.SessionCreator):
    """Creates a session and runs the variable and table initializers. A config of the caller's
    gets the CPU layout conversion of ``default_session_config`` where it is needed (on a copy)."""

    def __init__(self, target: str = "", config: tfv1.ConfigProto | None = None):
        self.target = target
        self.config = with_cpu_layout_conversion(config) if config is not None else default_session_config()

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


class ReuseSessionCreator(tfv1.train.SessionCreator):
    """Returns ``sess``, a session the caller created and initialized."""

    def __init__(self, sess):
        if not callable(getattr(sess, "run", None)):
            raise TypeError(f"ReuseSessionCreator takes a session, got {type(sess).__name__}")
        self.sess = sess

    def create_session(self):
        return self.sess


class SessionCreatorAdapter(tfv1.train.SessionCreator):
    """Returns ``func(session)`` for the session ``session_creator`` creates, e.g. a session
    wrapped for debugging."""

    def __init__(self, session_creator, func):
        if not isinstance(session_creator, tfv1.train.SessionCreator):
            raise TypeError(
                f"SessionCreatorAdapter takes a tf.compat.v1.train.SessionCreator, got {session_creator!r}"
            )
        if not callable(func):
            raise TypeError(f"SessionCreatorAdapter: func must be callable, got {func!r}")
        self._creator = session_creator
        self._func = func

    def create_session(self):
        return self._func(self._creator.create_session())
