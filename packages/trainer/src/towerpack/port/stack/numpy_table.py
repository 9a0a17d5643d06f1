"""The NumPy names a TensorFlow 1 era project uses that today's NumPy (2.x) no longer has, as data.

``np.int`` and its kin were the builtins themselves (NumPy 1.20 deprecated them, 1.24 removed them;
NumPy 2.0 brought ``np.bool`` and ``np.long`` back as NumPy's own scalar types, so those two now mean
something else); NumPy 2.0 dropped many aliases of names it keeps (``np.float_`` is ``np.float64``).
Exact replacements are rewritten, the rest reported with what to use (see table.py).
"""

from __future__ import annotations

from ..findings import Kind
from .table import Removal, Status, Table

_1_24 = "NumPy 1.24"
_2_0 = "NumPy 2.0"


def _exact(since: str, pairs: str, status: Status = Status.REMOVED) -> dict[str, Removal]:
    """``"old=new ..."``: ``numpy.old`` is exactly ``new`` (``module:name``, ``-module:name`` or a literal;
    a bare name is ``numpy:name``)."""
    table = {}
    for pair in pairs.split():
        old, _, new = pair.partition("=")
        if ":" not in new and new.lstrip("-").isidentifier():
            new = f"-numpy:{new[1:]}" if new.startswith("-") else f"numpy:{new}"
        table[f"numpy.{old}"] = Removal(since, new=new, status=status)
    return table


def _report(since: str, advice: dict[str, str]) -> dict[str, Removal]:
    return {f"numpy.{old}": Removal(since, advice=text) for old, text in advice.items()}


_EXCEPTIONS = (
    "AxisError ComplexWarning VisibleDeprecationWarning RankWarning TooHardError ModuleDeprecationWarning"
)
_FINANCIAL = "fv ipmt irr mirr nper npv pmt ppmt pv rate"

NUMPY = Table(
    Kind.NUMPY_REMOVED,
    {
        # The builtin aliases (NumPy 1.20's table: each was the builtin itself).
        **_exact(
            _1_24,
            "int=builtins:int float=builtins:float complex=builtins:complex object=builtins:object "
            "str=builtins:str unicode=builtins:str",
        ),
        **_exact(_1_24, "bool=builtins:bool long=builtins:int", Status.REDEFINED),
        **_exact(_1_24, "typeDict=sctypeDict"),
        # NumPy 2.0's removed aliases with an exact equivalent.
        **_exact(
            _2_0,
            "float_=float64 complex_=complex128 cfloat=complex128 singlecomplex=complex64 "
            "longfloat=longdouble longcomplex=clongdouble clongfloat=clongdouble string_=bytes_ "
            "unicode_=str_ int0=intp uint0=uintp bool8=bool_ object0=object_ str0=str_ bytes0=bytes_ "
            "void0=void",
        ),
        **_exact(
            _2_0,
            "Inf=inf Infinity=inf infty=inf PINF=inf NINF=-inf NaN=nan NAN=nan PZERO=0.0 NZERO=-0.0",
        ),
        **_exact(
            _2_0,
            "alltrue=all sometrue=any product=prod cumproduct=cumprod round_=round mat=asmatrix "
            "compare_chararrays=numpy.char:compare_chararrays format_parser=numpy.rec:format_parser "
            "byte_bounds=numpy.lib.array_utils:byte_bounds DataSource=numpy.lib.npyio:DataSource "
            "add_newdoc=numpy.lib:add_newdoc add_docstring=numpy.lib:add_docstring "
            "tracemalloc_domain=numpy.lib:tracemalloc_domain",
        ),
        **_exact(_2_0, " ".join(f"{e}=numpy.exceptions:{e}" for e in _EXCEPTIONS.split())),
        **_exact("NumPy 1.18", "rank=ndim"),
        **_exact("NumPy 2.4", "trapz=trapezoid"),
        **_exact("NumPy 2.5", "row_stack=vstack", Status.DEPRECATED),
        # No exact equivalent: reported.
        **_report(
            "NumPy 1.20",
            {f: f"numpy_financial.{f} (pip install numpy-financial)" for f in _FINANCIAL.split()},
        ),
        **_report("NumPy 1.22", {"loads": "pickle.loads"}),
        **_report(
            "NumPy 1.23",
            {"asscalar": "a.item()", "alen": "len(a) (alen also took scalars, as length 1)"},
        ),
        **_report(
            "NumPy 2.4", {"in1d": "np.isin(a, b).ravel() (in1d flattened its result; isin keeps a's shape)"}
        ),
        **_report(
            _2_0,
            {
                "asfarray": "np.asarray(a, dtype=np.float64) for integer input (asfarray kept the dtype "
                "of float input: float32 stayed float32)",
                "msort": "np.sort(a, axis=0)",
                "cast": "np.asarray(a, dtype=...)",
                "find_common_type": "np.result_type or np.promote_types",
                "issubclass_": "issubclass (it raises TypeError where issubclass_ returned False)",
                "safe_eval": "ast.literal_eval",
                "issubsctype": "np.issubdtype",
                "issctype": "issubclass(t, np.generic)",
                "obj2sctype": "np.dtype(obj).type",
                "sctype2char": "np.dtype(obj).char",
                "maximum_sctype": "the dtype you mean, named explicitly",
                "sctypes": "the dtypes you mean, listed explicitly",
                "set_string_function": "np.set_printoptions(formatter=...)",
                "recfromcsv": "np.genfromtxt(f, delimiter=',', names=True, dtype=None)",
                "recfromtxt": "np.genfromtxt(f, names=True, dtype=None)",
                "deprecate": "warnings.warn(..., DeprecationWarning)",
                "deprecate_with_doc": "warnings.warn(..., DeprecationWarning)",
                "who": "locals()",
                "source": "inspect.getsource",
                "lookfor": "a search of NumPy's documentation",
                "fastCopyAndTranspose": "a.T.copy()",
                "nbytes": "np.dtype(t).itemsize",
                "geterrobj": "the np.errstate context manager",
                "seterrobj": "the np.errstate context manager",
                "math": "the math module (import math)",
            },
        ),
    },
    attribute_modules=frozenset(
        {
            "numpy.char",
            "numpy.rec",
            "numpy.lib",
            "numpy.lib.array_utils",
            "numpy.lib.npyio",
            "numpy.exceptions",
        }
    ),
)
