"""Augmentors made of other augmentors or functions: choose one, apply sometimes, shuffle the order, map."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .base import ImageAugmentor
from .transform import BaseTransform, NoOpTransform, TransformFactory, TransformList

__all__ = ["Identity", "MapImage", "RandomApplyAug", "RandomChooseAug", "RandomOrderAug"]


def _check_augmentor(aug: Any, who: str) -> None:
    if not isinstance(aug, ImageAugmentor):
        raise TypeError(f"{who} takes augmentors, got {type(aug).__name__}: {aug!r}")


class Identity(ImageAugmentor):
    """Leave the image unchanged."""

    colour_affine = True  # nothing to draw, and a colour run passes over it

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        return NoOpTransform()


class RandomApplyAug(ImageAugmentor):
    """Apply ``aug`` with probability ``prob``, else nothing."""

    def __init__(self, aug: ImageAugmentor, prob: float) -> None:
        super().__init__()
        _check_augmentor(aug, "RandomApplyAug")
        self._init(locals())

    @property
    def colour_affine(self) -> bool:  # type: ignore[override]
        return self.aug.colour_affine

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        if self.rng.rand() < self.prob:
            return self.aug.get_transform(img)
        return NoOpTransform()

    def reset_state(self) -> None:
        super().reset_state()
        self.aug.reset_state()


class RandomChooseAug(ImageAugmentor):
    """Apply one augmentor chosen at random from ``aug_lists``.

    ``aug_lists`` holds either augmentors (chosen uniformly) or ``(augmentor, probability)`` pairs
    whose probabilities sum to 1; the first element decides which.
    """

    def __init__(self, aug_lists: Sequence[Any]) -> None:
        super().__init__()
        if not aug_lists:
            raise ValueError("RandomChooseAug needs at least one augmentor")
        if isinstance(aug_lists[0], (tuple, list)):
            augs = [pair[0] for pair in aug_lists]
            prob = np.asarray([float(pair[1]) for pair in aug_lists])
            if np.any(prob < 0) or not np.isclose(prob.sum(), 1.0):
                got = prob.tolist()
                raise ValueError(f"RandomChooseAug probabilities must be >= 0 and sum to 1, got {got}")
        else:
            augs = list(aug_lists)
            prob = np.full(len(augs), 1.0 / len(augs))
        for a in augs:
            _check_augmentor(a, "RandomChooseAug")
        self._init(locals())
        self._augs, self._prob = augs, prob / prob.sum()

    @property
    def colour_affine(self) -> bool:  # type: ignore[override]
        return all(a.colour_affine for a in self._augs)

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        idx = self.rng.choice(len(self._augs), p=self._prob)
        return self._augs[idx].get_transform(img)

    def reset_state(self) -> None:
        super().reset_state()
        for a in self._augs:
            a.reset_state()


class RandomOrderAug(ImageAugmentor):
    """Apply every augmentor of ``aug_lists`` in a random order.

    All transforms are drawn from the input image, so the augmentors should keep the image shape.
    Colour augmentors among them go in one pass on float32 pixels (:mod:`.colour_matrix`).
    """

    def __init__(self, aug_lists: Sequence[ImageAugmentor]) -> None:
        super().__init__()
        for a in aug_lists:
            _check_augmentor(a, "RandomOrderAug")
        self._init(locals())

    @property
    def colour_affine(self) -> bool:  # type: ignore[override]
        return all(a.colour_affine for a in self.aug_lists)

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        tfms = [a.get_transform(img) for a in self.aug_lists]
        order = self.rng.permutation(len(tfms))
        return TransformList([tfms[k] for k in order])

    def reset_state(self) -> None:
        super().reset_state()
        for a in self.aug_lists:
            a.reset_state()


class MapImage(ImageAugmentor):
    """Apply a function to the image (and ``coord_func`` to coordinates; without it they raise)."""

    def __init__(
        self,
        func: Callable[[np.ndarray], np.ndarray],
        coord_func: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        super().__init__()
        self._init(locals())
        fns = {"apply_image": func}
        if coord_func is not None:
            fns["apply_coords"] = coord_func
        self._transform = TransformFactory(name="MapImage", **fns)

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        return self._transform
