"""DSL type errors name the source line (issue 22: "DSL type errors carry no file:line"). A
typing rule runs after parsing, on the IR; the parser records where each Call was written
(``semantics/source_locations.py``) and the type inference prefixes ``file:line:col``."""

from __future__ import annotations

import pytest

from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.typeinfer import infer_module
from tilefoundry.semantics.typeinfer.core import TypeInferError

SRC = '''
@func
def f(x: Tensor[(4,), f32], y: Tensor[(3,), f32]):
    z = x * 2.0
    w = exp(z)
    return w + y

module(f)
'''


def test_a_type_error_names_the_file_line_and_column_of_the_call():
    m = parse_module(SRC, filename="model.py")
    with pytest.raises(TypeInferError) as ei:
        infer_module(m)
    msg = str(ei.value)
    assert msg.startswith("model.py:6:12: Binary: shapes"), msg  # `w + y`, not `x * 2.0`
    assert ei.value.location == "model.py:6:12"
    assert msg.count("model.py") == 1  # located once, by the innermost failing node


def test_nodes_built_without_the_dsl_have_no_location():
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ir import Call, Function, Module, Var
    from tilefoundry.semantics.ops import Binary, BinaryKind
    from tilefoundry.semantics.types import TensorType

    x, y = Var("x", TensorType((4,), DType.F32)), Var("y", TensorType((3,), DType.F32))
    m = Module((Function("f", (x, y), Call(Binary(BinaryKind.ADD), (x, y)), None),))
    with pytest.raises(TypeInferError) as ei:
        infer_module(m)
    assert str(ei.value).startswith("Binary: shapes")
