"""towerpack.trainer.models: the reference's layers, argscope, LinearWrap and regularizers."""

from .regularize import l1_regularizer, l2_regularizer, regularize_cost, regularize_cost_from_collection

__all__ = ["l1_regularizer", "l2_regularizer", "regularize_cost", "regularize_cost_from_collection"]
