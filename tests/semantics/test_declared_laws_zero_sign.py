"""F44: the law checks of two declarations that differ only in a zero's sign are not shared.
``-0.0 == 0.0`` makes the two ``DeclaredReducer`` values equal (and hash alike), so a cache keyed
by equality handed the +0 declaration the −0 one's verdicts: a false identity claim (+0 is no
identity of f32 addition: −0 + +0 = +0) passed once the −0 declaration had been checked."""

from __future__ import annotations

import pytest

from tilefoundry.semantics.declared_reducers import declare_reducer
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.reducer_laws import ReducerLawError, check_laws

KW = dict(state=(("s", DType.F32),), lift=("x",), merge=(("add", "a.s", "b.s"),),
          laws=(("identity", "exact"),))


def test_a_plus_zero_identity_is_refuted_after_the_minus_zero_one_passed():
    neg = declare_reducer("z", identity=(-0.0,), **KW)
    pos = declare_reducer("z", identity=(0.0,), **KW)
    assert neg == pos  # the premise: equal as Python values
    check_laws.cache_clear()
    (v,) = check_laws(neg)
    assert v.status != "falsified"
    with pytest.raises(ReducerLawError, match="identity"):
        check_laws(pos)
    assert check_laws(neg) == (v,)  # cached, and still the −0 verdict
