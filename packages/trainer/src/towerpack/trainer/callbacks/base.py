"""The Callback interface under the reference's module path (defined in ``towerpack.trainer.callback``)."""

from ..callback import Callback, CallbackFactory, ProxyCallback

__all__ = ["Callback", "CallbackFactory", "ProxyCallback"]
