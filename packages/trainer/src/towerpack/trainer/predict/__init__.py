"""Predictors: run a model on numpy inputs."""

from .base import OfflinePredictor, OnlinePredictor, PredictorBase
from .config import PredictConfig

__all__ = ["OfflinePredictor", "OnlinePredictor", "PredictConfig", "PredictorBase"]
