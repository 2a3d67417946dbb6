"""DType set and format descriptors (data only; conversions live in ``dtypes``).

Each float format is described by its field widths and the handful of facts that the IEEE-754
template leaves open: whether it has a sign, infinities, which codes are NaN, and whether the
largest exponent field holds finite values (E4M3FN) or specials (IEEE). Everything else — bias,
maximum finite, smallest normal and subnormal — is derived from those facts here, once, and the
tests check the derived numbers against the published format definitions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np

from tilefoundry.errors import InvalidArgumentError, bad_choice


class DType(enum.Enum):
    """Element types of the IR (ARCHITECTURE.md, Types)."""

    BOOL = "bool"
    I8 = "i8"
    U8 = "u8"
    I32 = "i32"
    U32 = "u32"
    I64 = "i64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    FP8E4M3 = "fp8e4m3"
    FP8E5M2 = "fp8e5m2"
    F8E8M0 = "f8e8m0"
    F4E2M1 = "f4e2m1"

    def __str__(self) -> str:
        return self.value

    @property
    def info(self) -> FormatInfo:
        return FORMATS[self]

    @property
    def is_float(self) -> bool:
        return FORMATS[self].kind == "float"

    @property
    def is_int(self) -> bool:
        return FORMATS[self].kind == "int"

    @property
    def storage(self) -> np.dtype:
        return FORMATS[self].storage

    @classmethod
    def parse(cls, name: DType | str) -> DType:
        """Accept a DType or its name ('bf16', 'fp8e4m3', ...); anything else raises."""
        if isinstance(name, DType):
            return name
        if isinstance(name, str):
            try:
                return cls(name)
            except ValueError:
                pass
        raise InvalidArgumentError(bad_choice("dtype", name, [d.value for d in cls]))


@dataclass(frozen=True)
class FormatInfo:
    """Descriptor of one element format.

    For floats: ``ebits`` exponent bits, ``mbits`` stored fraction bits, ``bias``; ``has_sign``,
    ``has_inf``; ``nan`` is one of ``"ieee"`` (all-ones exponent with nonzero fraction),
    ``"all_ones"`` (only S.1…1 — E4M3FN and E8M0), or ``"none"``; ``implicit_bit`` is False only
    for E8M0 (exponent-only, value 2^(code - bias), no zero). For ints: ``signed`` and ``bits``.
    """

    dtype: DType
    kind: str  # "bool" | "int" | "float"
    bits: int
    storage: np.dtype
    signed: bool = True
    ebits: int = 0
    mbits: int = 0
    bias: int = 0
    has_sign: bool = True
    has_inf: bool = False
    nan: str = "none"
    implicit_bit: bool = True
    evaluable: bool = True

    # ---- derived float facts -------------------------------------------------------------
    @property
    def emin(self) -> int:
        """Exponent of the smallest normal (E8M0: of the smallest value)."""
        return (0 if not self.implicit_bit else 1) - self.bias

    @property
    def max_code(self) -> int:
        """Magnitude code (sign bit clear) of the largest finite value."""
        all_ones_exp = (1 << self.ebits) - 1
        if not self.implicit_bit:  # E8M0: 0xFF is NaN
            return all_ones_exp - 1
        if self.has_inf or self.nan == "ieee":
            return ((all_ones_exp - 1) << self.mbits) | ((1 << self.mbits) - 1)
        if self.nan == "all_ones":  # E4M3FN: S.1111.111 is NaN, S.1111.110 is the max
            return (all_ones_exp << self.mbits) | ((1 << self.mbits) - 2)
        return (all_ones_exp << self.mbits) | ((1 << self.mbits) - 1)  # no specials (E2M1)

    @property
    def inf_code(self) -> int | None:
        return ((1 << self.ebits) - 1) << self.mbits if self.has_inf else None

    @property
    def nan_code(self) -> int | None:
        """The canonical (quiet) NaN magnitude code the reference produces."""
        if self.nan == "ieee":
            return (((1 << self.ebits) - 1) << self.mbits) | (1 << (self.mbits - 1))
        if self.nan == "all_ones":
            return (1 << (self.bits - (1 if self.has_sign else 0))) - 1
        return None

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1) if self.has_sign else 0

    def code_value(self, code: int) -> Fraction | None:
        """Exact value of a finite magnitude code (None for NaN / inf codes); definitional."""
        if self.kind != "float":
            raise InvalidArgumentError(f"code_value: {self.dtype} is not a float format")
        if code > self.max_code:
            return None
        if not self.implicit_bit:
            return Fraction(2) ** (code - self.bias)
        e = code >> self.mbits
        f = code & ((1 << self.mbits) - 1)
        if e == 0:
            return Fraction(f, 1 << self.mbits) * Fraction(2) ** self.emin
        return Fraction((1 << self.mbits) + f, 1 << self.mbits) * Fraction(2) ** (e - self.bias)

    @property
    def max_finite(self) -> Fraction:
        v = self.code_value(self.max_code)
        assert v is not None
        return v

    @property
    def min_normal(self) -> Fraction:
        return Fraction(2) ** self.emin

    @property
    def min_subnormal(self) -> Fraction:
        if not self.implicit_bit:
            return self.min_normal
        return Fraction(2) ** (self.emin - self.mbits)


def _float(dt, bits, storage, ebits, mbits, *, has_inf, nan, has_sign=True, implicit=True,
           evaluable=True):
    bias = (1 << (ebits - 1)) - 1
    return FormatInfo(dt, "float", bits, np.dtype(storage), True, ebits, mbits, bias, has_sign,
                      has_inf, nan, implicit, evaluable)


FORMATS: dict[DType, FormatInfo] = {
    DType.BOOL: FormatInfo(DType.BOOL, "bool", 8, np.dtype(np.bool_), signed=False),
    DType.I8: FormatInfo(DType.I8, "int", 8, np.dtype(np.int8)),
    DType.U8: FormatInfo(DType.U8, "int", 8, np.dtype(np.uint8), signed=False),
    DType.I32: FormatInfo(DType.I32, "int", 32, np.dtype(np.int32)),
    # u32 exists for Bitcast's f32 <-> u32 pair (Tile design): only Bitcast, Select and the
    # comparisons accept it (typeinfer.core.U32_OPS; docs/decisions.md D216)
    DType.U32: FormatInfo(DType.U32, "int", 32, np.dtype(np.uint32), signed=False),
    DType.I64: FormatInfo(DType.I64, "int", 64, np.dtype(np.int64)),
    DType.F32: _float(DType.F32, 32, np.float32, 8, 23, has_inf=True, nan="ieee"),
    DType.F16: _float(DType.F16, 16, np.float16, 5, 10, has_inf=True, nan="ieee"),
    DType.BF16: _float(DType.BF16, 16, ml_dtypes.bfloat16, 8, 7, has_inf=True, nan="ieee"),
    DType.FP8E4M3: _float(DType.FP8E4M3, 8, ml_dtypes.float8_e4m3fn, 4, 3, has_inf=False,
                          nan="all_ones"),
    DType.FP8E5M2: _float(DType.FP8E5M2, 8, ml_dtypes.float8_e5m2, 5, 2, has_inf=True,
                          nan="ieee"),
    DType.F8E8M0: _float(DType.F8E8M0, 8, ml_dtypes.float8_e8m0fnu, 8, 0, has_inf=False,
                         nan="all_ones", has_sign=False, implicit=False),
    DType.F4E2M1: _float(DType.F4E2M1, 4, ml_dtypes.float4_e2m1fn, 2, 1, has_inf=False,
                         nan="none", evaluable=False),
}

#: numpy storage dtype -> DType (each storage type is distinct, so this is a bijection).
_BY_STORAGE: dict[np.dtype, DType] = {info.storage: dt for dt, info in FORMATS.items()}

#: Unsigned integer type holding a format's bit pattern.
_UINT_OF_BITS = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                 64: np.dtype(np.uint64)}


def bits_dtype(dt: DType) -> np.dtype:
    """The unsigned integer numpy type a value of ``dt`` is viewed as for its bit pattern."""
    return _UINT_OF_BITS[max(8, FORMATS[dt].bits)] if dt is not DType.BOOL else np.dtype(np.uint8)


def dtype_of(x: np.ndarray) -> DType:
    """The DType whose storage type an array has; other numpy types raise."""
    arr_dt = np.asarray(x).dtype
    try:
        return _BY_STORAGE[arr_dt]
    except KeyError:
        allowed = [f"{info.storage} ({dt})" for dt, info in FORMATS.items()]
        raise InvalidArgumentError(
            bad_choice("array storage type", str(arr_dt), allowed,
                       "Convert the data to one of these storage types first (for example "
                       "np.asarray(x, np.float32)); float64 and other numpy types are not IR "
                       "dtypes.")) from None


def require_evaluable(dt: DType, what: str) -> None:
    from tilefoundry.errors import UnsupportedDTypeError

    if not FORMATS[dt].evaluable:
        raise UnsupportedDTypeError(
            f"{what}: dtype {dt} exists at the type level only and cannot be evaluated "
            f"(HIR spec, Cast: 'evaluating a Cast to a dtype outside this set (e.g. f4e2m1) "
            f"raises an unsupported-dtype error'); use a packed-FP4 lowering outside the "
            f"reference evaluator")
