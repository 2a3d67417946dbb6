"""The rule a FAIL broke, in words, with the section of docs/contracts.md it comes from (issue
33, Deliver 4; D302).

A FAIL record's message starts with the rule: ``"Unary(exp) bf16: correctly rounded within 1
ulp of the exact value (contracts.md § Transcendentals: the ULP budget table) — output 0: FAIL
under ulp(...): ... 5 ulp apart (error 0.00015, admitted [a, b])"``. The rule text is data:
``RULES`` maps (contract kind, op class) to (rule, section); ``"*"`` is the kind's default.
The contract kinds are the oracle's (``semantics.evaluator.registry.CONTRACT_KINDS``) plus
``enclosure`` (an output downstream of an inexact op) and ``exact_bits`` (an output made only
of copies, D298); a test holds the table complete for
them and every section to a heading of docs/contracts.md.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ORACLE_KINDS", "RULES", "SECTIONS", "contract_kind", "fail_message", "rule_for"]

_ELEM = "Elementwise arithmetic"
_CAST = "Conversions (`Cast`)"
_ULP = "Transcendentals: the ULP budget table"
_RED = "Reductions"
_TILE = "Seeded, masked and custom reductions (the tile family)"
_MM = "MatMul and Conv2D"
_SCAN = "Scan, sort, top-k"
_SHARD = "Sharded programs: Partial completion"
_JUDGED = "How an output is judged"

#: the contract kinds an output verdict can name beyond the op contracts' own: an output
#: downstream of an inexact op, and one made only of copies (D298)
ORACLE_KINDS = ("enclosure", "exact_bits")

_EXACT_ELEM = "widen to f32, operate in IEEE f32, round once to {dtype}: bit-exact"
_TILE_OPS = ("SeededReduce", "MaskedReduce", "CustomReduce")

#: (contract kind, op class or "*") -> (the rule in words, the docs/contracts.md section);
#: ``{dtype}`` and ``{ulp}`` are filled in from the failing output
RULES: dict[tuple[str, str], tuple[str, str]] = {
    ("exact", "*"): ("an exact function of its inputs: bit-identical to the reference (any NaN "
                     "equals any NaN, -0 and +0 differ)", _JUDGED),
    ("exact", "Binary"): (_EXACT_ELEM, _ELEM),
    ("exact", "Unary"): (_EXACT_ELEM, _ELEM),
    ("exact", "ReLU"): (_EXACT_ELEM, _ELEM),
    ("exact", "Cast"): ("one rounding of the exact source value to {dtype}, ties to even "
                        "(unless its rounding mode says otherwise), then its overflow mode: "
                        "bit-exact", _CAST),
    ("exact", "Reduce"): ("a fold policy, max / min / abs_max or an integer reduction is an "
                          "exact function (f32 accumulation, one rounding): bit-exact", _RED),
    ("exact", "MatMul"): ("the unfused or fma K-order chain in f32, rounded once to {dtype}: "
                          "bit-exact without reassociation", _MM),
    ("exact", "Conv2D"): ("the unfused or fma K-order chain in f32 on the im2col operands, "
                          "rounded once to {dtype}: bit-exact without reassociation", _MM),
    ("exact", "Mma"): ("the K-order fold from acc (K = 0 returns acc): bit-exact without "
                       "reassociation", _MM),
    ("exact", "Scan"): ("a fold_left, max / min or integer scan follows the left recurrence: "
                        "bit-exact", _SCAN),
    ("exact", "Sort"): ("a total order (-0 == +0, ties by ascending index, NaNs where nan= "
                        "says): values and indices bit-exact", _SCAN),
    ("exact", "TopK"): ("NaNs least preferred, ties to the lowest index: values and indices "
                        "bit-exact", _SCAN),
    ("exact", "Select"): ("the chosen operand's bits: bit-exact", _SCAN),
    ("exact", "Bitcast"): ("the reinterpreted bits: bit-exact", _SCAN),
    ("exact", "Reshard"): ("a Partial(max / min) completion or an integer sum: bit-exact",
                           _SHARD),
    ("ulp", "*"): ("correctly rounded within {ulp} ulp in {dtype} of the exact value", _ULP),
    ("admitted_set", "*"): ("one of the results the op's set admits", _JUDGED),
    ("admitted_set", "Reduce"): ("a float sum / mean under a tree policy: a result some "
                                 "bracketing the policy allows produces (f32 accumulation, "
                                 "rounded once to {dtype})", _RED),
    ("admitted_set", "MatMul"): ("with reassociation: the unfused or fma K-order chain, or "
                                 "within gamma(K)*sum|a*b| of the exact dot product", _MM),
    ("admitted_set", "Conv2D"): ("with reassociation: the unfused or fma K-order chain, or "
                                 "within gamma(K)*sum|a*b| of the exact dot product", _MM),
    ("admitted_set", "Mma"): ("with reassociation: the K-order chains from acc, or within "
                              "gamma(K+1)*(sum|a*b| + |acc|) of the exact result", _MM),
    ("admitted_set", "Scan"): ("an ordered_tree add scan: each prefix a bracketing of its own "
                               "leaves in order", _SCAN),
    ("admitted_set", "Reshard"): ("a Partial(sum) completion: an unordered tree over the "
                                  "devices' pieces", _SHARD),
    ("unspecified", "*"): ("exact where the contract gives a value; the open elements (float "
                           "-> int out of range) accept anything", _JUDGED),
    ("unspecified", "Cast"): ("exact in range; a float -> int element out of range accepts "
                              "anything", _CAST),
    ("permutation", "*"): ("each fiber holds the reference's elements in some order, values "
                           "and indices permuted alike (TopK sorted=False)", _SCAN),
    ("exact_bits", "*"): ("made only of copies: bit-identical to the reference, NaN payload "
                          "and sign included", _JUDGED),
    ("enclosure", "*"): ("downstream of an inexact op: inside the sound enclosure of every "
                         "result the contracts upstream admit", _JUDGED),
}
for _op in _TILE_OPS:
    RULES[("exact", _op)] = ("exact under its policy: bit-exact", _TILE)
    RULES[("admitted_set", _op)] = ("a result the op's tree policy admits over its valid "
                                    "elements", _TILE)

#: every section the rules cite (a test holds each to a heading of docs/contracts.md)
SECTIONS = tuple(sorted({s for _, s in RULES.values()}))

_ULP_RE = re.compile(r"ulp\(<= ([0-9.eE+-]+) in (\w+)")


def contract_kind(contract: str) -> str:
    """The kind of an output verdict's contract text (``"ulp(<= 1 in bf16, ...)"`` -> ulp,
    ``"exact bits (a copy: ...)"`` -> exact_bits)."""
    text = str(contract)
    if text.startswith("exact bits"):
        return "exact_bits"
    return text.split("(")[0].split(" ")[0] or "?"


def rule_for(contract: str, op_label: str, dtype: str) -> tuple[str, str]:
    """(the rule in words, its docs/contracts.md section) for an output judged under
    ``contract`` produced by ``op_label`` (``"Unary(exp)"``) in ``dtype``."""
    kind = contract_kind(contract)
    cls = op_label.split("(")[0]
    text, section = RULES.get((kind, cls)) or RULES.get((kind, "*")) or \
        (f"the {kind} contract", _JUDGED)
    m = _ULP_RE.search(str(contract))
    ulp = m.group(1) if m else "?"
    if m and dtype == "?":
        dtype = m.group(2)
    return text.format(dtype=dtype, ulp=ulp), section


def _labels(verdict: Any) -> tuple[list[str], list[str]]:
    """The producing op label and the dtype of each output of ``verdict``."""
    from tilefoundry.oracle.compare import as_outputs, gather_outputs
    from tilefoundry.oracle.diagnose import producer_label
    from tilefoundry.semantics.formats import dtype_of

    ev = verdict.reference
    n = len(verdict.outputs)
    ops, dts = ["?"] * n, ["?"] * n
    try:
        values = [gather_outputs(x) for x in as_outputs(ev.value)]
    except Exception:  # no reference value to read: the dtype stays unnamed
        values = []
    for o in verdict.outputs:
        i = o.output
        d = getattr(o, "diagnosis", None)
        label = getattr(d, "op", "") if d is not None else ""
        if not label and getattr(ev, "entry_fn", None) is not None:
            label = producer_label(ev.entry_fn, i)
        if i < n:
            ops[i] = label or "?"
            try:
                dts[i] = dtype_of(values[i]).value
            except Exception:  # a value that is no IR array: the dtype stays unnamed
                pass
    return ops, dts


def fail_message(verdict: Any, fails: list) -> str:
    """The FAIL message: the rule the first failing output broke, in words, with its section,
    then that output's line (worst element, ulp distance, error, admitted interval)."""
    first = fails[0]
    try:
        ops, dts = _labels(verdict)
        op, dt = ops[first.output], dts[first.output]
    except Exception:  # the rule is an aid: a failure to name it leaves the line as it was
        op, dt = "?", "?"
    text, section = rule_for(first.contract, op, dt)
    head = f"{op} {dt}: {text} (contracts.md § {section})"
    more = f" (+{len(fails) - 1} more failing output(s))" if len(fails) > 1 else ""
    return f"{head} — {first.line()}{more}"
