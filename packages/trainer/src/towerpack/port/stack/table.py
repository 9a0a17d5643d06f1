"""What the libraries around a TensorFlow 1 era project removed since (SciPy, Pillow, OpenCV 2's
constants, the Python standard library), and what to use instead, as data.

A table maps a dotted path (``scipy.misc.imread``; a module path covers everything under it) to a
``Removal``. ``new`` is set only where the replacement is exactly the same object or value, and then
``towerpack port`` rewrites the code; otherwise ``advice`` says what to do and the place is reported.
NumPy's table is numpy_table.py; rewrite.py applies both.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..findings import Kind


class Status(enum.Enum):
    """What the installed library has under the old name today."""

    REMOVED = "removed"  # nothing: using it raises AttributeError or ImportError
    REDEFINED = "redefined"  # a different object than the old code meant (np.bool, np.long)
    STUB = "stub"  # a placeholder that raises when called (scipy.interpolate.interp2d)
    DEPRECATED = "deprecated"  # still there, warns, goes in a later release


@dataclass(frozen=True)
class Removal:
    """One removed name: ``since``, the release that removed it (for a deprecated name, the one that
    does); ``new``, the exact replacement: ``module:name`` (``builtins:int`` for a builtin), with a
    leading ``-`` for its negation (``-numpy:inf``), or a literal (``0.0``); else ``advice``."""

    since: str
    new: str | None = None
    advice: str = ""
    status: Status = Status.REMOVED

    def __post_init__(self) -> None:
        if (self.new is None) == (not self.advice):
            raise ValueError(f"a Removal needs an exact replacement (new) or advice, not both: {self!r}")

    @property
    def replacement(self) -> str:
        """The replacement as a person writes it (``numpy.float64``, ``-numpy.inf``, ``int``)."""
        if self.new is None:
            return self.advice
        sign, target = ("-", self.new[1:]) if self.new.startswith("-") else ("", self.new)
        module, colon, name = target.partition(":")
        if not colon:
            return self.new
        return sign + (name if module == "builtins" else f"{module}.{name}")


@dataclass(frozen=True)
class Table:
    """Removals of one family of libraries, reported as ``kind``. ``attribute_modules`` are submodules
    reachable as attributes once their package is imported (``numpy.exceptions`` after ``import
    numpy``): a replacement there needs no import of its own."""

    kind: Kind
    entries: Mapping[str, Removal]
    attribute_modules: frozenset[str] = field(default_factory=frozenset)

    @property
    def roots(self) -> frozenset[str]:
        """The top-level packages the table is about (a module that imports none of them is skipped)."""
        return frozenset(path.partition(".")[0] for path in self.entries)


def _same(since: str, module: str, names: str, status: Status = Status.REMOVED) -> dict[str, Removal]:
    """Names whose exact replacement is in ``module``: ``{old path: Removal(new=module:name)}``;
    ``names`` holds ``old.path`` (the same name) or ``old.path=new_name``, space separated."""
    table = {}
    for item in names.split():
        old, _, renamed = item.partition("=")
        table[old] = Removal(since, new=f"{module}:{renamed or old.rpartition('.')[2]}", status=status)
    return table


_IMAGEIO = "imageio (pip install imageio)"


def _prefixed(module: str, names: str) -> str:
    return " ".join(f"{module}.{name}" for name in names.split())


_COLLECTIONS_ABC = (
    "Awaitable Coroutine AsyncIterable AsyncIterator AsyncGenerator Hashable Iterable Iterator Generator "
    "Reversible Sized Container Callable Collection Set MutableSet Mapping MutableMapping MappingView "
    "KeysView ItemsView ValuesView Sequence MutableSequence ByteString"
)
_WINDOWS = (
    "barthann bartlett blackman blackmanharris bohman boxcar cosine flattop gaussian hamming hann kaiser "
    "nuttall parzen triang tukey general_gaussian chebwin exponential"
)

STACK = Table(
    Kind.STACK_REMOVED,
    {
        # SciPy
        "scipy.misc.imread": Removal(
            "SciPy 1.3", advice=f"imageio.v2.imread(path) from {_IMAGEIO}, or cv2.imread (BGR order)"
        ),
        "scipy.misc.imsave": Removal(
            "SciPy 1.3",
            advice=f"imageio.v2.imwrite(path, array) from {_IMAGEIO}; convert to uint8 first "
            "(imsave rescaled other dtypes to 0..255)",
        ),
        "scipy.misc.imresize": Removal(
            "SciPy 1.3",
            advice="cv2.resize(array, (width, height)) or numpy.asarray(PIL.Image.fromarray(array)"
            ".resize((width, height))); note (width, height), where imresize took (height, width), and "
            "that imresize returned uint8 rescaled to 0..255",
        ),
        "scipy.misc.imrotate": Removal(
            "SciPy 1.3",
            advice="scipy.ndimage.rotate(array, angle) or PIL.Image.fromarray(array).rotate(angle)",
        ),
        "scipy.misc.imfilter": Removal("SciPy 1.3", advice="PIL.ImageFilter, or scipy.ndimage's filters"),
        "scipy.misc.toimage": Removal("SciPy 1.3", advice="PIL.Image.fromarray(array)"),
        "scipy.misc.fromimage": Removal("SciPy 1.3", advice="numpy.asarray(image)"),
        "scipy.misc.bytescale": Removal(
            "SciPy 1.3",
            advice="((a - a.min()) * 255 / (a.max() - a.min())).astype(numpy.uint8), by hand",
        ),
        "scipy.misc.imshow": Removal("SciPy 1.3", advice="matplotlib.pyplot.imshow, or cv2.imshow"),
        "scipy.ndimage.imread": Removal("SciPy 1.3", advice=f"imageio.v2.imread(path) from {_IMAGEIO}"),
        **_same("SciPy 1.3", "scipy.special", "scipy.misc.comb scipy.misc.factorial scipy.misc.factorial2"),
        **_same("SciPy 1.3", "scipy.special", "scipy.misc.logsumexp"),
        "scipy.misc.factorialk": Removal(
            "SciPy 1.3",
            advice="scipy.special.factorialk(n, k, exact=True) (its default is exact=False since SciPy 1.15)",
        ),
        **{
            f"scipy.misc.{name}": Removal(
                "SciPy 1.15",
                advice=f"scipy.datasets.{name}() (needs pooch: pip install pooch; downloads the data once)",
            )
            for name in ("face", "ascent", "electrocardiogram")
        },
        "scipy.misc.derivative": Removal(
            "SciPy 1.15", advice="finite differences by hand, or scipy.differentiate.derivative (SciPy 1.15+)"
        ),
        "scipy.misc.central_diff_weights": Removal(
            "SciPy 1.15", advice="no replacement in SciPy: compute the finite-difference weights by hand"
        ),
        # towerpack.utils keeps the removed class's behaviour (sorting, orientation, fill, NaN), which
        # RegularGridInterpolator and RectBivariateSpline do not each give.
        "scipy.interpolate.interp2d": Removal(
            "SciPy 1.14", new="towerpack.utils.interpolate:interp2d", status=Status.STUB
        ),
        **_same(
            "SciPy 1.14",
            "scipy.integrate",
            "scipy.integrate.trapz=trapezoid scipy.integrate.cumtrapz=cumulative_trapezoid",
        ),
        "scipy.integrate.simps": Removal(
            "SciPy 1.14", advice="scipy.integrate.simpson(y, x=x) (x is keyword-only and `even` is gone)"
        ),
        **{
            f"scipy.integrate.{name}": Removal(
                "SciPy 1.15", advice="scipy.integrate.quad (or scipy.integrate.romb for sampled data)"
            )
            for name in ("romberg", "quadrature")
        },
        **_same("SciPy 1.13", "scipy.signal.windows", _prefixed("scipy.signal", _WINDOWS)),
        "scipy.linalg.pinv2": Removal(
            "SciPy 1.9", advice="scipy.linalg.pinv (SVD-based too; cond/rcond became atol/rtol)"
        ),
        "scipy.stats.itemfreq": Removal("SciPy 1.9", advice="numpy.unique(a, return_counts=True)"),
        "scipy.stats.binom_test": Removal("SciPy 1.12", advice="scipy.stats.binomtest(k, n, p).pvalue"),
        "scipy.special.sph_harm": Removal(
            "SciPy 1.17",
            advice="scipy.special.sph_harm_y(n, m, theta, phi): degree first and the angles swapped "
            "(sph_harm(m, n, theta, phi) took the azimuth as theta)",
        ),
        # Pillow
        **_same("Pillow 10", "PIL.Image", "PIL.Image.ANTIALIAS=LANCZOS PIL.Image.LINEAR=BILINEAR"),
        **_same("Pillow 10", "PIL.Image", "PIL.Image.CUBIC=BICUBIC"),
        # OpenCV 2's constants
        **_same("OpenCV 3", "cv2", "cv2.CV_AA=LINE_AA cv2.CV_LOAD_IMAGE_COLOR=IMREAD_COLOR"),
        **_same(
            "OpenCV 3",
            "cv2",
            "cv2.CV_LOAD_IMAGE_GRAYSCALE=IMREAD_GRAYSCALE cv2.CV_LOAD_IMAGE_UNCHANGED=IMREAD_UNCHANGED",
        ),
        "cv2.cv": Removal(
            "OpenCV 3",
            advice="the constants are on cv2 without the CV_ prefix (cv2.cv.CV_FOURCC is "
            "cv2.VideoWriter_fourcc, cv2.cv.CV_INTER_LINEAR is cv2.INTER_LINEAR)",
        ),
        # The standard library
        **_same("Python 3.10", "collections.abc", _prefixed("collections", _COLLECTIONS_ABC)),
        **_same("Python 3.9", "base64", "base64.encodestring=encodebytes base64.decodestring=decodebytes"),
        "inspect.getargspec": Removal(
            "Python 3.11",
            advice="inspect.getfullargspec (its result names the keyword-arguments parameter `varkw`, not "
            "`keywords`, and adds the keyword-only ones) or inspect.signature",
        ),
        "time.clock": Removal(
            "Python 3.8", advice="time.perf_counter for elapsed time, time.process_time for CPU time"
        ),
        "fractions.gcd": Removal(
            "Python 3.9",
            advice="math.gcd (never negative; fractions.gcd took the sign of its second argument)",
        ),
        "platform.linux_distribution": Removal(
            "Python 3.8", advice="platform.freedesktop_os_release() or the distro package"
        ),
        "cgi.escape": Removal(
            "Python 3.8", advice="html.escape(s, quote=False) (html.escape quotes by default)"
        ),
    },
    attribute_modules=frozenset({"scipy.special", "scipy.integrate", "scipy.signal.windows"}),
)
