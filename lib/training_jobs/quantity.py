"""Kubernetes quantities, exact: what ``resource.Quantity`` does, for the gang's ``minResources``.

A :class:`Quantity` is an integer count of nano-units, parsed with Kubernetes' grammar and
printed in Kubernetes' canonical form (``resource.Quantity.String()``), so what the operator
writes round-trips through the API server unchanged. See :func:`format_quantity`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

NANO = 10**9
_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DEC_BY_EXP = {e: s for s, e in _DEC_SUFFIXES.items()}
_BIN_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_BIN_BY_POWER = {p: s for s, p in _BIN_SUFFIXES.items()}
# <signedNumber><suffix>; an exponent suffix is an integer (Kubernetes parses it with ParseInt).
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]))?"
)
_INT32_MAX = 2**31 - 1
# Larger decimal exponents are valid for Kubernetes but would make exact integers enormous; no
# resource amount comes near 10^1000, so such input is refused instead.
_MAX_EXPONENT = 1000


@dataclass(frozen=True)
class Quantity:
    """An exact Kubernetes quantity: ``nanos`` units of 10^-9 and the format it prints in.

    Kubernetes keeps at most nano precision (finer input is rounded up, away from zero) and
    remembers whether a quantity was written with a binary suffix (``BinarySI``), an exponent
    (``DecimalExponent``) or a decimal suffix or none (``DecimalSI``).
    """

    nanos: int
    format: str = DECIMAL_SI

    @property
    def value(self) -> Decimal:
        """The exact value as a Decimal (the string constructor never rounds)."""
        return Decimal(f"{self.nanos}E-9")

    def __add__(self, other: Quantity) -> Quantity:
        """``resource.Quantity.Add``: the sum keeps the receiver's format unless it is zero."""
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos + other.nanos, fmt)

    def __str__(self) -> str:
        return format_quantity(self)


def _round_up(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded away from zero (inf.RoundUp)."""
    q, r = divmod(abs(numerator), denominator)
    q += 1 if r else 0
    return -q if numerator < 0 else q


def parse_quantity(text: Any) -> Quantity:
    """``resource.ParseQuantity``: Kubernetes' quantity grammar, exactly.

    ``<sign><digits>[.<digits>][Ki|Mi|Gi|Ti|Pi|Ei | e<int> | n|u|m|k|M|G|T|P|E]``; ints and floats
    (a YAML ``cpu: 2``) are read through their decimal text. Raises ``ValueError`` for anything
    the API server would refuse ("", " 1", "1.1.M", "0.1mi", "1e", ".").
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, float, Decimal)):
        raise ValueError(f"quantity {text!r} is not a string or number")
    s = text if isinstance(text, str) else str(text)
    m = _QUANTITY.fullmatch(s)
    if not m or not (m["int"] or m["frac"]):
        raise ValueError(f"quantity {s!r} is not a valid Kubernetes quantity (e.g. 500m, 2, 1.5Gi)")
    frac = m["frac"] or ""
    mantissa = int((m["int"] or "") + frac or "0")
    exponent = -len(frac)
    factor = 1
    fmt = DECIMAL_SI
    if m["bin"]:
        fmt = BINARY_SI
        factor = 1024 ** _BIN_SUFFIXES[m["bin"]]
    elif m["exp"] is not None:
        fmt = DECIMAL_EXPONENT
        e = int(m["exp"])
        if abs(e) > _INT32_MAX:
            raise ValueError(f"quantity {s!r}: exponent out of range")
        exponent += e
    elif m["dec"]:
        exponent += _DEC_SUFFIXES[m["dec"]]
    if exponent > _MAX_EXPONENT:
        raise ValueError(f"quantity {s!r} is too large")
    numerator = mantissa * factor
    if m["sign"] == "-":
        numerator = -numerator
    shift = exponent + 9
    if numerator == 0:
        nanos = 0
    elif shift >= 0:
        nanos = numerator * 10**shift
    elif -shift > len(str(abs(numerator))) + 1:
        nanos = 1 if numerator > 0 else -1  # far below nano: rounds up to one nano
    else:
        nanos = _round_up(numerator, 10**-shift)
    if fmt == BINARY_SI and 0 < abs(nanos) < NANO:
        fmt = DECIMAL_SI  # Kubernetes: a binary quantity below 1 is printed as decimal
    return Quantity(nanos, fmt)


def _decimal_form(sign: str, nanos: int, fmt: str) -> str:
    """Mantissa and a power of ten that is a multiple of 3 (``AsCanonicalBytes``)."""
    mantissa, exponent = nanos, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3  # floor to a multiple of 3, as Go's exponent%3 switch
    mantissa *= 10**shift
    exponent -= shift
    if fmt == DECIMAL_SI and exponent in _DEC_BY_EXP:
        return f"{sign}{mantissa}{_DEC_BY_EXP[exponent]}"
    # DecimalExponent, or DecimalSI beyond E / below n: exponent notation (Kubernetes >= 1.34).
    return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")


def format_quantity(q: Quantity) -> str:
    """``resource.Quantity.String()``: the canonical text Kubernetes itself would print.

    - zero is ``0``;
    - ``DecimalSI``: the largest SI suffix (n, u, m, "", k, M, G, T, P, E) that keeps the
      mantissa an integer, trailing zeros moved into the suffix: ``1500m``, ``2``, ``1500k``,
      ``1G``; beyond ``E`` or below ``n``, exponent notation (``1e21``);
    - ``BinarySI``: an integer of at least 1024 becomes the largest binary suffix that divides it
      (``1536Mi``, ``1Gi``, ``2073741824`` when nothing divides); anything below 1024 or not an
      integer prints as ``DecimalSI`` (``512``, ``1024m``); past ``Ei``, exponent notation;
    - ``DecimalExponent``: ``<mantissa>e<multiple of 3>`` (``1e3``, ``80e-3``, ``12e6``).

    Every output is a valid quantity that parses back to the same value.
    """
    nanos = q.nanos
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    fmt = q.format if q.format in (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT) else DECIMAL_EXPONENT
    if fmt == BINARY_SI:
        if nanos < 1024 * NANO or nanos % NANO:
            fmt = DECIMAL_SI
        else:
            number, power = nanos // NANO, 0
            while number % 1024 == 0:
                number //= 1024
                power += 1
            if power in _BIN_BY_POWER or power == 0:
                return f"{sign}{number}{_BIN_BY_POWER.get(power, '')}"
            fmt = DECIMAL_EXPONENT
    return _decimal_form(sign, nanos, fmt)


def add_resource_list(total: dict[str, Quantity], requests: Any, limits: Any) -> None:
    """Upstream ``AddResourceList``: add a container's requests, or its limits when requests is unset.

    As in Go, requests that are present but empty (``requests: {}``) still win over limits.
    """
    source = requests if requests is not None else (limits or {})
    for name, amount in source.items():
        q = parse_quantity(amount)
        total[name] = total[name] + q if name in total else q
