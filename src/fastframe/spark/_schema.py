"""The Spark schema of the rows, built without a running JVM, and schema checks."""

from __future__ import annotations

from typing import Any, List, Tuple

from ._columns import COLUMNS, ERROR_NULL


def _spark_type(kind: str) -> Any:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    if kind == "string":
        return StringType()
    if kind == "bigint":
        return LongType()
    if kind == "binary":
        return BinaryType()
    if kind == "timestamp":
        return TimestampType()
    if kind == "map<string,string>":
        return MapType(StringType(), StringType(), valueContainsNull=False)
    if kind == "array<struct<name:string,value:string>>":
        pair = StructType([StructField("name", StringType(), False), StructField("value", StringType(), False)])
        return ArrayType(pair, containsNull=False)
    raise AssertionError(kind)


def spark_schema() -> Any:
    """The full row schema as a ``pyspark.sql.types.StructType``."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(name, _spark_type(kind), nullable) for name, kind, nullable, _ in COLUMNS])


def _arrow_type(name: str, data_type: Any) -> Any:
    """The Arrow type Spark expects for one of our columns, nested nullability included."""
    import pyarrow as pa  # type: ignore[import-untyped]

    from ._arrow import ARROW_TYPES

    if name == "headers":
        pair = data_type.elementType
        struct = pa.struct([pa.field(f.name, pa.string(), f.nullable) for f in pair.fields])
        return pa.list_(pa.field("element", struct, data_type.containsNull))
    if name == "header_map":
        return pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string(), data_type.valueContainsNull))
    return ARROW_TYPES[name]


def check_read_schema(schema: Any) -> List[Tuple[str, bool, Any]]:
    """``(name, nullable, arrow type)`` of the columns a (possibly user-given) schema asks for.

    A user schema may select and reorder columns (the others are then never
    built), but each must be one of ours with its type.
    """
    full = {field.name: field for field in spark_schema().fields}
    out = []
    for field in schema.fields:
        ours = full.get(field.name)
        if ours is None:
            raise ValueError(f"unknown column {field.name!r}: the stomp source has {', '.join(full)}")
        if field.dataType.simpleString() != ours.dataType.simpleString():
            raise ValueError(
                f"column {field.name!r} must be {ours.dataType.simpleString()}, not {field.dataType.simpleString()}"
            )
        if not field.nullable and field.name in ERROR_NULL:
            raise ValueError(f"column {field.name!r} must be nullable: it is null on error rows")
        out.append((field.name, field.nullable, _arrow_type(field.name, field.dataType)))
    if not out:
        raise ValueError("the schema selects no column")
    return out
