"""Predictors: run a model on numpy inputs (or on an InputSource), in this process or in workers."""

from .base import AsyncPredictorBase, OfflinePredictor, OnlinePredictor, PredictorBase
from .concurrency import MultiProcessPredictWorker, MultiProcessQueuePredictWorker, MultiThreadAsyncPredictor
from .config import PredictConfig
from .dataset import DatasetPredictorBase, MultiProcessDatasetPredictor, SimpleDatasetPredictor
from .feedfree import FeedfreePredictor
from .multigpu import DataParallelOfflinePredictor, MultiTowerOfflinePredictor

__all__ = [
    "AsyncPredictorBase",
    "DataParallelOfflinePredictor",
    "DatasetPredictorBase",
    "FeedfreePredictor",
    "MultiProcessDatasetPredictor",
    "MultiProcessPredictWorker",
    "MultiProcessQueuePredictWorker",
    "MultiThreadAsyncPredictor",
    "MultiTowerOfflinePredictor",
    "OfflinePredictor",
    "OnlinePredictor",
    "PredictConfig",
    "PredictorBase",
    "SimpleDatasetPredictor",
]
