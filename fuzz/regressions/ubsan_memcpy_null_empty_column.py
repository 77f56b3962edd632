"""UBSan: memcpy(NULL, src, 0) in the compiled twin's _extend (a column buffer not yet allocated).

Found by the sanitizer run of the test suite (tests/test_columns.py). The first row with an empty
body (or any empty field whose column buffer has no memory yet) calls
``_extend(&store.bodies, body, 0)`` while ``store.bodies.data`` is NULL: ``memcpy`` with a NULL
destination is undefined behaviour even for 0 bytes (and so is NULL + 0 in C), and an optimiser may
assume the pointer is non-NULL afterwards. Harmless on today's compilers; a fix is one line in
``_extend``: ``if size == 0: return 0`` before the memcpy.

    fuzz/sanitized.sh python fuzz/regressions/ubsan_memcpy_null_empty_column.py
    -> _codec_c.c: runtime error: null pointer passed as argument 1, which is declared to never be null
       #0 __pyx_f_8_codec_c__extend  #1 __pyx_f_8_codec_c_12_ColumnStore_commit
"""

import fastframe

# through to_columns
columns = fastframe.to_columns([fastframe.Frame("SEND")])
assert columns.rows == 1 and columns.body_data == b""

# and through the column decoder, from the wire
decoder = fastframe.ColumnDecoder()
assert decoder.feed(b"SEND\n\n\0") == 1
assert decoder.take().body_data == b""
print("ok: no sanitizer report")
