"""The vectorized conversions against the exact scalar model, exhaustively, and against the peers.

Issue "Foundation", Must show: 'all 65,536 f16 and bf16 bit patterns cast to every narrower
format, and all 256 fp8 patterns (and all pairs for binary ops) through widen-op-round, agree bit
for bit with the exact scalar model, and with ml_dtypes wherever the contracts coincide; the
disagreements with ml_dtypes and with torch are exactly the documented ones'.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch  # noqa: F401  (the test environment installs torch 2.13.0: a missing peer must fail)

from tilefoundry.conformance import numerics_sweep as sw
from tilefoundry.conformance import peers
from tilefoundry.semantics.dtypes import DType, cast, to_bits


@pytest.mark.parametrize("src", sw.EXHAUSTIVE_SOURCES, ids=str)
def test_every_pattern_through_every_conversion_matches_the_exact_model(src):
    rows = sw.cast_sweep(sources=(src,))
    assert len(rows) == 21  # 6 float destinations (16 modes) + 4 ints + bool
    for r in rows:
        assert r.exact_mismatches == 0, sw.format_rows([r])
        for p, counts in r.peer.items():
            # a peer disagreeing is judged by the exact model: only our error fails
            assert counts["ours_wrong"] == 0, (p, sw.format_rows([r]))
    assert {p for r in rows for p in r.peer} == set(peers.PEERS)


@pytest.mark.parametrize("dt", sw.ARITH_DTYPES, ids=str)
def test_every_fp8_pair_through_widen_op_round_matches_the_exact_model(dt):
    rows = sw.arithmetic_sweep(dts=(dt,))
    assert {r.dst for r in rows} == set(sw.BINARY_OPS) | set(sw.UNARY_OPS)
    for r in rows:
        assert r.n == (65536 if r.what == "binary" else 256)
        assert r.exact_mismatches == 0, sw.format_rows([r])


def test_structured_f32_sources_match_the_exact_model():
    """Every sign x exponent field with ties, near-ties, carries and sticky bits at every rounding
    position, through every conversion and mode (the 10^7-sample run is `tilefoundry selfcheck
    --f32-samples 10000000`)."""
    n = sw.structured_f32_patterns().size
    assert n > 90_000
    rows = sw.f32_sweep(n, workers=2)
    assert len(rows) == 18
    for r in rows:
        assert r.n == n and r.exact_mismatches == 0, sw.format_rows([r])


def test_structured_patterns_contain_every_tie_position():
    pats = sw.structured_f32_patterns()
    mant = pats & 0x7FFFFF
    for p in range(23):
        tie = 1 << p
        assert np.any(mant == tie) and np.any(mant == (tie | (2 << p) if p < 22 else tie))


def _wide_sources(src: DType) -> np.ndarray:
    rng = np.random.default_rng(1234)
    n = 200_000
    if src is DType.F32:
        return sw.f32_sources(n, seed=1234).view(np.float32)
    info = np.iinfo(src.storage)
    x = rng.integers(info.min, info.max, n, dtype=src.storage, endpoint=True)
    # integers a few units from bf16 ties, where a double rounding through f32 shows
    k = rng.integers(1, 2**7, 2000).astype(np.int64)
    e = rng.integers(25, 31 if src is DType.I32 else 62, 2000)
    near = ((2 * k + 1) << (e - 8)) + rng.integers(-3, 4, 2000)
    return np.concatenate([x, near.astype(src.storage)])


@pytest.mark.parametrize("peer", peers.PEERS)
@pytest.mark.parametrize("src", [DType.F32, DType.I32, DType.I64], ids=str)
def test_wide_sources_where_a_peer_disagrees_the_reference_is_right(peer, src):
    """Sampled wide sources: every element where the peer differs from its version's model, or
    from the reference, is decided by the exact scalar model; the reference must be right."""
    x = _wide_sources(src)
    judged = 0
    for dst in sw.FLOATS[1:]:
        got = peers.run_peer(peer, x, dst)
        if got is None:
            continue
        judged += 1
        counts = sw.judge_peer_cast(peer, x, dst, got)
        assert counts["ours_wrong"] == 0, (dst, counts)
    assert judged >= 4


# ---------------------------------------------------------------------------------------------
# the judge itself: planted errors (ours and the peer's), version modelling
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("peer", peers.PEERS)
def test_planted_wrong_reference_value_fails(peer):
    """Meta-test: one wrong reference value (bf16 -> fp8e5m2 of 1.0 given as 2.0) is convicted
    by the exact model, for each peer, even though the peer is right there."""
    x = sw.all_patterns(DType.BF16)
    dst = DType.FP8E5M2
    ours = cast(x, dst).copy()
    i = int(np.flatnonzero(to_bits(x) == 0x3F80)[0])  # bf16 1.0
    ours[i] = cast(np.array([2.0], np.float32), dst)[0]
    got = peers.run_peer(peer, x, dst)
    counts = sw.judge_peer_cast(peer, x, dst, got, ours=ours)
    assert counts["ours_wrong"] == 1
    assert sw.judge_peer_cast(peer, x, dst, got)["ours_wrong"] == 0


def test_planted_wrong_peer_value_is_a_finding_not_a_failure(monkeypatch):
    # a ledger of its own: the planted finding must not reach the session's report
    monkeypatch.setattr(peers, "FINDINGS", peers.Findings())
    x = sw.all_patterns(DType.BF16)
    dst = DType.FP8E5M2
    got = peers.run_peer("ml_dtypes", x, dst).copy()
    i = int(np.flatnonzero(to_bits(x) == 0x3F80)[0])
    got[i] = cast(np.array([2.0], np.float32), dst)[0]
    before = sum(v for k, v in peers.FINDINGS.items() if k.klass == "undocumented")
    counts = sw.judge_peer_cast("ml_dtypes", x, dst, got)
    assert counts["undocumented"] == 1 and counts["ours_wrong"] == 0
    after = sum(v for k, v in peers.FINDINGS.items() if k.klass == "undocumented")
    assert after == before + 1
    key = next(k for k in peers.FINDINGS if k.klass == "undocumented" and "bf16->fp8e5m2" in
               k.code_path)
    assert key.version == peers.peer_version("ml_dtypes")


def test_the_judge_calls_the_exact_model_only_on_disagreements():
    seen = []
    mask = np.zeros((4, 5), bool)
    mask[1, 2] = mask[3, 4] = True
    j = peers.judge("ml_dtypes", "test", mask, lambda idx: seen.append(idx) or idx == 7,
                    findings=peers.Findings())
    assert [list(s) for s in seen] == [[7, 19]]
    assert j.disagreements == 2 and j.peer_wrong == 1 and j.ours_wrong.tolist() == [19]
    with pytest.raises(AssertionError, match="reference is wrong on 1 element"):
        j.assert_ours_right("test")


# F1 / F2 (docs/findings.md) exist in ml_dtypes <= 0.6 and are gone in 0.7; F4 (fp8e4m3
# saturation) is torch >= 2.13 (2.11 gives NaN): the model follows the version it is asked about.
E8M0_QUIRK = np.array([0x00500000, 0x00400001, 0x003FFFFF], np.uint32).view(np.float32)
DOUBLE_ROUNDING = np.array([1732247588], np.int32)  # docs/findings.md F2


@pytest.mark.parametrize(("peer", "version", "x", "dst", "name", "present"), [
    ("ml_dtypes", "0.6.0", E8M0_QUIRK, DType.F8E8M0, "e8m0-subnormal-range-rounds-up", True),
    ("ml_dtypes", "0.7.0", E8M0_QUIRK, DType.F8E8M0, "e8m0-subnormal-range-rounds-up", False),
    ("ml_dtypes", "0.5.1", DOUBLE_ROUNDING, DType.BF16, "int-to-float-through-f32", True),
    ("ml_dtypes", "0.7.0", DOUBLE_ROUNDING, DType.BF16, "int-to-float-through-f32", False),
    ("torch", "2.13.0+cpu", np.array([500.0, np.inf], np.float32), DType.FP8E4M3,
     "fp8e4m3-saturates", True),
    ("torch", "2.11.0", np.array([500.0, np.inf], np.float32), DType.FP8E4M3,
     "fp8e4m3-saturates", False),
])
def test_deviations_are_modelled_by_version(peer, version, x, dst, name, present):
    want, counts = peers.model(peer, x, dst, version=version)
    ours = cast(x, dst)
    if present:
        assert counts[name] > 0 and not peers.same_class(want, ours).all()
    else:
        assert name not in counts and peers.same_class(want, ours).all()


def test_every_documented_deviation_of_the_installed_peers_is_observed():
    """A deviation the installed peer version has that never changes a result would be a
    phantom entry in the docs."""
    seen: dict[tuple[str, str], int] = {}
    xs = [sw.all_patterns(DType.BF16), sw.all_patterns(DType.F16), E8M0_QUIRK,
          np.array([1732247588, -(2**31)], np.int32)]
    for x in xs:
        for dst in sw.FLOATS[1:]:
            for peer in peers.PEERS:
                _, counts = peers.model(peer, x, dst)
                for k, v in counts.items():
                    seen[(peer, k)] = seen.get((peer, k), 0) + v
    present = [d for d in peers.DEVIATIONS if d.present_in(peers.peer_version(d.peer))]
    assert present  # torch 2.13's deviations at least
    for dev in present:
        assert seen.get((dev.peer, dev.name), 0) > 0, dev.name
