"""ggml tensor types, as far as a sequence state's row headers need them.

Every block of rows in a memory's ``state_write`` output starts with the tensor's
``(int32_t) type`` and then its ``ggml_row_size(type, n_embd)`` (or, transposed, its
``ggml_type_size(type)``). A type outside this table, or a row size that is not a whole number of
the type's blocks, was not written by any build: the field was overwritten.

The table is ``enum ggml_type`` (ggml/include/ggml.h:389-434, the same in the October tree,
b11434 and b11549; the gaps are types whose support was removed) with each type's
``blck_size`` and ``type_size`` from ``type_traits`` (ggml/src/ggml.c:632-946), the sizes being
``sizeof`` of the block structs of ggml/src/ggml-common.h, compiled and printed from each tree.
"""

from __future__ import annotations

from typing import NamedTuple


class GgmlType(NamedTuple):
    name: str
    blck_size: int  # elements per block
    type_size: int  # bytes per block


GGML_TYPES: dict[int, GgmlType] = {
    0: GgmlType("f32", 1, 4),
    1: GgmlType("f16", 1, 2),
    2: GgmlType("q4_0", 32, 18),
    3: GgmlType("q4_1", 32, 20),
    6: GgmlType("q5_0", 32, 22),
    7: GgmlType("q5_1", 32, 24),
    8: GgmlType("q8_0", 32, 34),
    9: GgmlType("q8_1", 32, 36),
    10: GgmlType("q2_K", 256, 84),
    11: GgmlType("q3_K", 256, 110),
    12: GgmlType("q4_K", 256, 144),
    13: GgmlType("q5_K", 256, 176),
    14: GgmlType("q6_K", 256, 210),
    15: GgmlType("q8_K", 256, 292),
    16: GgmlType("iq2_xxs", 256, 66),
    17: GgmlType("iq2_xs", 256, 74),
    18: GgmlType("iq3_xxs", 256, 98),
    19: GgmlType("iq1_s", 256, 50),
    20: GgmlType("iq4_nl", 32, 18),
    21: GgmlType("iq3_s", 256, 110),
    22: GgmlType("iq2_s", 256, 82),
    23: GgmlType("iq4_xs", 256, 136),
    24: GgmlType("i8", 1, 1),
    25: GgmlType("i16", 1, 2),
    26: GgmlType("i32", 1, 4),
    27: GgmlType("i64", 1, 8),
    28: GgmlType("f64", 1, 8),
    29: GgmlType("iq1_m", 256, 56),
    30: GgmlType("bf16", 1, 2),
    34: GgmlType("tq1_0", 256, 54),
    35: GgmlType("tq2_0", 256, 66),
    39: GgmlType("mxfp4", 32, 17),
    40: GgmlType("nvfp4", 64, 36),
    41: GgmlType("q1_0", 128, 18),
    42: GgmlType("q2_0", 64, 18),
}


def type_name(t: int) -> str:
    known = GGML_TYPES.get(t)
    return known.name if known is not None else f"type {t}"


def row_elements(t: int, row_bytes: int) -> int | None:
    """The ``n_embd`` of a row of ``row_bytes`` bytes of type ``t``: ``ggml_row_size`` inverted
    (``type_size * n / blck_size``, ggml/src/ggml.c:1339-1344); None when no whole number of blocks makes it."""
    known = GGML_TYPES.get(t)
    if known is None or row_bytes <= 0 or row_bytes % known.type_size:
        return None
    return row_bytes // known.type_size * known.blck_size
