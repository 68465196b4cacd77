"""The SQL lookup function on pyspark < 4.1 (3.5 LTS and 4.0), which have no Arrow UDFs.

There the function is an iterator pandas UDF (``Iterator[pd.Series]`` to
``Iterator[pd.DataFrame]``) running the very worker-side code of the Arrow UDF
(:func:`enrich.spark.join.join_batches.lookup_structs_for`), on the same Arrow arrays: the columnar
lane, the cache, the pools. Two hooks in the Python worker's pandas UDF serializer make
that possible:

- each pandas column handed to a pandas UDF carries the Arrow column it was converted
  from (in ``attrs``), so the key reaches the lane with its own Arrow type: an integer
  key with NULLs stays an integer (pandas would make it a float) and a binary key stays
  binary;
- a DataFrame this module returns carries its Arrow struct array, which the serializer
  sends as it is: no value goes through pandas on the way out, and a row whose key found
  nothing is a NULL struct, as on the latest Spark (a pandas UDF cannot return a NULL
  struct: its serializer builds the struct from the frame's columns, without a mask).

The hooks are installed when Spark's Python worker unpickles the function, before it
reads a batch; they act only on what they mark, so other pandas UDFs in the same worker
are unchanged (their columns carry a reference to their Arrow column, nothing more).
Verified on pyspark 3.5.x and 4.0.x in CI (``./scripts/dev test-compat``); a pyspark
whose serializer lacks the hooked methods fails the function's first batch with an
error saying so, rather than returning different structs.

Speed: the keys are still converted to pandas by Spark (a cost the Arrow UDF has not);
the figures per version are in docs/spark-versions.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

import pandas as pd
import pyarrow as pa

from ..join.join_batches import JoinPlan, lookup_structs_for
from ..join.key_columns import checked_key_arrays

__all__ = ("pandas_lookup_udf", "pandas_struct_udf", "install_worker_hooks")

# attrs keys: the Arrow column a pandas input came from; the Arrow array a result stands for.
_INPUT = "enrich.arrow_input"
_OUTPUT = "enrich.arrow_output"
_HOOKED = "_enrich_arrow_hooks"


class _Carried:
    """An Arrow array riding on a pandas object's ``attrs``.

    pandas deep-copies ``attrs`` when it derives one object from another; the array is
    shared instead (copying it would cost as much as the conversion avoided).
    """

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def __copy__(self) -> _Carried:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Carried:
        return self


def install_worker_hooks() -> None:
    """Hook pyspark's pandas UDF serializer (idempotent; see the module docstring).

    Raises:
        RuntimeError: this pyspark's serializer has not the methods hooked here.
    """
    from pyspark.sql.pandas import serializers

    cls: Any = serializers.ArrowStreamPandasUDFSerializer  # type: ignore[attr-defined]
    if getattr(cls, _HOOKED, False):
        return
    to_pandas = getattr(cls, "arrow_to_pandas", None)
    to_struct = getattr(cls, "_create_struct_array", None)
    if to_pandas is None or to_struct is None:
        import pyspark

        raise RuntimeError(
            f"the SQL lookup function cannot run on pyspark {pyspark.__version__}: its "
            f"pandas UDF serializer has no arrow_to_pandas/_create_struct_array to pass "
            f"Arrow arrays through (known to work: 3.5.x, 4.0.x; 4.1+ uses Arrow UDFs)"
        )

    @functools.wraps(to_pandas)
    def arrow_to_pandas(self: Any, arrow_column: Any, *args: Any, **kwargs: Any) -> Any:
        result = to_pandas(self, arrow_column, *args, **kwargs)
        if isinstance(result, (pd.Series, pd.DataFrame)):  # a DataFrame: a struct argument
            result.attrs[_INPUT] = _Carried(arrow_column)
        return result

    @functools.wraps(to_struct)
    def _create_struct_array(self: Any, df: Any, arrow_type: Any, *args: Any, **kwargs: Any) -> Any:
        carried = df.attrs.get(_OUTPUT) if isinstance(df, pd.DataFrame) else None
        if not isinstance(carried, _Carried):
            return to_struct(self, df, arrow_type, *args, **kwargs)
        array = carried.array
        return array if array.type == arrow_type else array.cast(arrow_type)

    cls.arrow_to_pandas = arrow_to_pandas
    cls._create_struct_array = _create_struct_array
    setattr(cls, _HOOKED, True)


def _hooks_installed() -> bool:
    from pyspark.sql.pandas import serializers

    cls = serializers.ArrowStreamPandasUDFSerializer  # type: ignore[attr-defined]
    return bool(getattr(cls, _HOOKED, False))


class _WorkerHooks:
    """Installs the hooks in the process that unpickles it: Spark's Python worker reads
    (unpickles) a UDF before it reads the UDF's first batch."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_installed_hooks, ())

    def check(self) -> None:
        """Raises RuntimeError when the hooks are not installed in this process."""
        if not _hooks_installed():
            raise RuntimeError(
                "the SQL lookup function runs where the pandas UDF serializer hooks are "
                "not installed (they are installed when a Python worker unpickles it)"
            )


def _installed_hooks() -> _WorkerHooks:
    install_worker_hooks()
    return _WorkerHooks()


def _arrow_of(column: Any) -> pa.Array:
    carried = column.attrs.get(_INPUT) if isinstance(column, (pd.Series, pd.DataFrame)) else None
    if not isinstance(carried, _Carried) or len(carried.array) != len(column):
        raise RuntimeError(
            "the SQL function's argument column arrived without its Arrow array: the "
            "pandas UDF serializer hooks are not in place in this Python worker"
        )
    array = carried.array
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks()
    return array


def _key_arrays(inputs: Iterator[Any]) -> Iterator[Any]:
    for columns in inputs:
        if isinstance(columns, tuple):
            yield tuple(_arrow_of(c) for c in columns)
        else:
            yield _arrow_of(columns)


def pandas_lookup_udf(plan: JoinPlan, return_type: Any) -> Any:
    """The SQL function of ``plan`` as an iterator pandas UDF returning ``return_type``."""
    structs: Callable[[Iterator[Any]], Iterator[pa.Array]] = lookup_structs_for(plan)
    name = plan.name

    def function(inputs: Iterator[Any]) -> Iterator[pa.Array]:
        return structs(checked_key_arrays(name, inputs))

    return pandas_struct_udf(function, return_type)


def pandas_struct_udf(
    function: Callable[[Iterator[Any]], Iterator[pa.Array]], return_type: Any
) -> Any:
    """``function`` (per batch, its arguments as Arrow arrays -- a tuple of them for
    several -- to a struct array) as an iterator pandas UDF returning ``return_type``,
    with the hooks that carry the arrays through pandas unchanged."""
    from pyspark.sql.pandas.functions import pandas_udf

    hooks = _WorkerHooks()

    def udf(inputs: Iterator[Any]) -> Iterator[pd.DataFrame]:
        hooks.check()  # referenced here so that unpickling the function installs them
        for array in function(_key_arrays(inputs)):
            frame = pd.DataFrame(index=pd.RangeIndex(len(array)))
            frame.attrs[_OUTPUT] = _Carried(array)
            yield frame

    # Spark picks the UDF's kind from the type hints: an iterator of argument columns (a
    # tuple of them for several arguments) to an iterator of frames (a struct result).
    udf.__annotations__ = {
        "inputs": Iterator[tuple[pd.Series, ...]],
        "return": Iterator[pd.DataFrame],
    }
    # pyspark's stubs type only the functionType= form, which warns at run time.
    return cast(Any, pandas_udf)(udf, return_type)
