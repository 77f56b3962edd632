# cython: freethreading_compatible=True
# (Py_mod_gil: free-threaded CPython keeps the GIL off. No module-level state changes after import;
# per-object state is guarded by critical sections, which compile to nothing with the GIL.)
"""The compiled twin: the same codec as ``_codec_py``, parsing on raw byte pointers.

Rules live once, in the shared modules: options (``_options``), limits and
tables (``_constants``), and the diagnosis of a bad head line (``_diagnose``).
This module finds lines with memchr, checks them in one pass, and asks
``_diagnose`` only when a line is not plainly clean, so its errors are the
Python twin's. Frames and headers given by hand take a compiled path in the
usual shapes and the shared rules (``_frames``) otherwise; an encoding it
cannot do gets its error from ``_frames.encode_error``, as the Python twin's
encoder does. It imports no other twin. A ColumnDecoder is the same decoder writing
its rows into a _ColumnStore (Arrow-layout buffers) instead of Frame objects.

The module is assembled from files included by concern, each readable in one
sitting (500 lines or fewer), in this order:

- _scan.pxi: scanning helpers (memchr-style word tests, byte flags), the
  interned commands and header names, the escape tables;
- _frame.pxi: Frame and Heartbeat;
- _columns.pxi: the column store a ColumnDecoder fills (Arrow layout);
- _decoder.pxi: the Decoder (state, public methods, the decoding steps) and
  decode(); the steps have the Python twin's names (_run, _head_lines,
  _parse_command, _parse_header, _begin_body, _read_body);
- _fields.pxi: the decoder's field caches (names and values by their wire
  bytes, (name, value) tuples), unescaping, the headers of the frame in progress;
- _feeding.pxi: the decoder's buffer (bytes parsed in place, the unconsumed
  tail kept) and the one-copy sink of a large body arriving in pieces;
- _faults.pxi: the decoder's errors: excerpts, diagnosis, the head's limits;
- _column_decoder.pxi: ColumnDecoder;
- _encoder.pxi: the Encoder and encode();
- _route.pxi: route_messages(), a read's everyday MESSAGEs into their queues, and
  first_row_without(), the check of a read decoded into columns.

One extension module, not several with .pxd files: the parts share C types
and inline helpers freely, nothing is exported at the C level, and the build
stays one cythonize call (msgpack assembles _cmsgpack.pyx the same way).
Cython allows no include inside a cdef class body, so the decoder's helpers
are module-level cdef functions taking the decoder (``_field(self, ...)``)
rather than methods: a direct C call (no vtable), which the C compiler may
inline; the Decoder class keeps its state, its public methods and the steps
named as in the Python twin.
"""

cimport cython
from cpython.buffer cimport PyBUF_FULL_RO, PyBuffer_IsContiguous, PyBuffer_Release, PyObject_CheckBuffer, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_Clear, PyErr_ExceptionMatches
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_Size
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject
from cpython.list cimport PyList_AsTuple
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy, memmove

import sys

from ._constants import (
    BODY_COMMANDS,
    COMMANDS_BY_VERSION,
    COMMON_HEADER_NAMES,
    CLIENT_COMMANDS,
    MAX_CONTENT_LENGTH as _MAX_CONTENT_LENGTH,
    SERVER_COMMANDS,
    UNESCAPE,
    UNESCAPED_COMMANDS,
)
from ._diagnose import (
    BODY_NOT_ALLOWED,
    BODY_TOO_LARGE,
    FRAME_TOO_LARGE,
    LINE_TOO_LONG,
    MISSING_NULL,
    TOO_MANY_HEADERS,
    TRUNCATED,
    command_problem,
    header_problem,
)
from ._errors import (
    EXCERPT_RADIUS,
    NOT_BYTES,
    NOT_CONTIGUOUS,
    REENTRANT_CALL,
    BodyNotAllowedError,
    FrameError,
    LimitExceededError,
    MissingNullError,
    TruncatedError,
    make_decode_error,
)
from ._frames import body_bytes, encode_error, normalize_headers
from ._layout import (
    MAX_COLUMN_BYTES,
    NO_HEARTBEAT_EVENTS,
    NO_INVALID_UTF8,
    NOT_COLUMNS,
    NOT_TEXT,
    ROW_TOO_LARGE,
    TOO_LARGE_FOR_COLUMNS,
    Columns,
    take_limits,
)
from ._options import decoder_options, encoder_options, received_size, receive_size
from ._slots import MAX_SLOTS as _MAX_SLOTS, slot_descriptors, wrong_count

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    # the same, unchecked: NULL with the error set (see _encodable)
    const char *_utf8_or_null "PyUnicode_AsUTF8AndSize" (PyObject *text, Py_ssize_t *size)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject *text)
    void *PyUnicode_DATA_PTR "PyUnicode_DATA" (PyObject *text)
    int _PyBytes_Resize(PyObject **bytes, Py_ssize_t size) except -1
    PyObject *PyDict_SetDefault(object mapping, object key, object default) except NULL  # borrowed

cdef extern from *:
    """
    #ifdef Py_GIL_DISABLED
    #define FF_FREE_THREADED 1
    #else
    #define FF_FREE_THREADED 0
    #endif
    """
    # a constant: the C compiler drops the branches for the other kind of build
    const bint FREE_THREADED "FF_FREE_THREADED"

__all__ = [
    "Frame", "Heartbeat", "Decoder", "ColumnDecoder", "Encoder", "decode", "encode", "to_columns", "route_messages",
    "first_row_without", "SlotMaker",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "c"

cdef enum:
    LF = 10
    CR = 13
    COLON = 58
    BACKSLASH = 92
    MAX_INTERNED = 64
    CACHE_SLOTS = 256  # per-decoder cache of short names and values, by their wire bytes
    PAIR_SLOTS = 256  # per-decoder cache of (name, value) tuples
    ENCODER_SLOTS = 256  # per-encoder cache of escaping verdicts
    CACHE_MAX_SIZE = 40
    MAX_SLOTS = 16  # a SlotMaker's offsets (the same as _slots.MAX_SLOTS: asserted at import)
    SINK_MIN = 65536  # a body this large, arriving in pieces, is copied once: into its own bytes object
    SINK_RESERVE = 1048576  # ... sized at once to the body when the body is at most this large
    SINK_AHEAD = 16  # ... and at most this many times what has arrived of it (_sink_size)

cdef unsigned long long MAX_CONTENT_LENGTH = _MAX_CONTENT_LENGTH  # typed once, in _constants
if MAX_SLOTS != _MAX_SLOTS:
    raise ImportError("the compiled twin's MAX_SLOTS differs from _slots.MAX_SLOTS: rebuild it")
cdef long long MAX_COLUMN = MAX_COLUMN_BYTES
cdef Py_ssize_t RADIUS = EXCERPT_RADIUS  # bytes either side of an error's offset in its excerpt

cdef enum Phase:
    BETWEEN = 0
    HEAD = 1
    BODY = 2

cdef bytes EOL_LF = b"\n"
cdef bytes EOL_CRLF = b"\r\n"
cdef object RAW = object()  # a field a ColumnDecoder copies as it is on the wire


# the module, by concern (as msgpack assembles its own); the order is the order of definition
include "_scan.pxi"
include "_frame.pxi"
include "_columns.pxi"
include "_decoder.pxi"
include "_fields.pxi"
include "_feeding.pxi"
include "_faults.pxi"
include "_column_decoder.pxi"
include "_encoder.pxi"
include "_route.pxi"
