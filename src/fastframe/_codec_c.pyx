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
"""

cimport cython
from cpython.buffer cimport PyBUF_FULL_RO, PyBuffer_IsContiguous, PyBuffer_Release, PyObject_CheckBuffer, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_Next
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
    ROW_TOO_LARGE,
    TOO_LARGE_FOR_COLUMNS,
    Columns,
    take_limits,
)
from ._options import decoder_options, encoder_options, received_size, receive_size

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject *text)
    void *PyUnicode_DATA_PTR "PyUnicode_DATA" (PyObject *text)
    int _PyBytes_Resize(PyObject **bytes, Py_ssize_t size) except -1
    PyObject *PyDict_SetDefault(object mapping, object key, object default) except NULL  # borrowed

__all__ = [
    "Frame", "Heartbeat", "Decoder", "ColumnDecoder", "Encoder", "decode", "encode", "to_columns", "IMPLEMENTATION",
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
    SINK_MIN = 65536  # a body this large, arriving in pieces, is copied once: into its own bytes object

cdef unsigned long long MAX_CONTENT_LENGTH = _MAX_CONTENT_LENGTH  # typed once, in _constants
cdef long long MAX_COLUMN = MAX_COLUMN_BYTES
cdef Py_ssize_t RADIUS = EXCERPT_RADIUS  # bytes either side of an error's offset in its excerpt

cdef enum Phase:
    BETWEEN = 0
    HEAD = 1
    BODY = 2

cdef bytes EOL_LF = b"\n"
cdef bytes EOL_CRLF = b"\r\n"
cdef object RAW = object()  # a field a ColumnDecoder copies as it is on the wire


# ---------------------------------------------------------------- interned strings
# Commands are compared by length and memcmp against this table, and the
# cached str is returned: no new object per frame. Common header names seed
# each decoder's cache of short names and values (see Decoder._field).

cdef struct Interned:
    const char *data
    Py_ssize_t size
    PyObject *text

cdef Interned _commands[MAX_INTERNED]
cdef int _n_commands = 0
cdef tuple _name_objects = tuple(COMMON_HEADER_NAMES)
cdef tuple _command_objects = tuple(sorted(CLIENT_COMMANDS | SERVER_COMMANDS))


cdef int _fill(Interned *table, tuple texts) except -1:
    cdef Py_ssize_t size
    cdef int i
    for i in range(len(texts)):
        table[i].data = PyUnicode_AsUTF8AndSize(texts[i], &size)
        table[i].size = size
        table[i].text = <PyObject *>texts[i]
    return len(texts)


_n_commands = _fill(_commands, _command_objects)


cdef inline object _lookup(Interned *table, int count, const char *data, Py_ssize_t size):
    cdef int i
    for i in range(count):
        if table[i].size == size and table[i].data[0] == data[0] and memcmp(table[i].data, data, size) == 0:
            return <object>table[i].text
    return None


cdef inline str _ascii(const unsigned char *data, Py_ssize_t size):
    """A str from bytes known to be ASCII: no decoding, one copy."""
    cdef object text = PyUnicode_New(size, 127)
    memcpy(PyUnicode_DATA(text), data, size)
    return <str>text


cdef struct CacheSlot:
    PyObject *text  # owned: the decoded (and unescaped) str
    Py_ssize_t size
    unsigned char raw[CACHE_MAX_SIZE]  # the bytes on the wire


cdef struct PairSlot:
    PyObject *pair  # owned; it owns its name and value, so their addresses stay theirs
    PyObject *name
    PyObject *value


cdef inline unsigned long long _load8(const unsigned char *data, Py_ssize_t size) noexcept:
    """The first min(size, 8) bytes as an integer (zero-padded)."""
    cdef unsigned long long word = 0
    cdef Py_ssize_t k
    if size >= 8:
        memcpy(&word, data, 8)
    else:
        for k in range(size):
            word |= (<unsigned long long>data[k]) << (8 * k)
    return word


cdef inline size_t _slot(unsigned long long head, const unsigned char *data, Py_ssize_t size) noexcept:
    # the first and last 8 bytes and the length; a collision only costs a miss
    cdef unsigned long long tail = _load8(data + size - 8, 8) if size > 8 else 0
    cdef unsigned long long h = (head ^ (tail >> 7) ^ (tail << 29) ^ <unsigned long long>size) * 0x9E3779B97F4A7C15ULL
    return <size_t>(h >> 56) & (CACHE_SLOTS - 1)


# ---------------------------------------------------------------- frame


@cython.no_gc
@cython.final
cdef class Frame:
    """One STOMP frame: ``command``, ``headers`` and ``body``.

    ``headers`` is a tuple of ``(name, value)`` pairs in wire order with
    repeats kept; :meth:`get` returns the first entry of a name, as the
    specification requires. Frames are immutable and hashable, and compare
    equal when command, headers and body are equal (whichever twin made them).
    ``offset`` is the stream offset of the frame's first byte for decoded
    frames, ``None`` for frames built by hand; it takes no part in equality.
    """

    # Fields hold only str, bytes and tuples of str, so a Frame can never be
    # part of a reference cycle: the type is left out of the cyclic GC.
    cdef str _command
    cdef tuple _headers
    cdef bytes _body
    cdef Py_ssize_t _offset

    __fastframe_frame__ = True

    def __init__(self, command, headers=(), body=b""):
        if not isinstance(command, str):
            raise TypeError(f"command must be str, not {type(command).__name__}")
        self._command = command if type(command) is str else str(command)
        self._headers = _normalized(headers)
        self._body = body if type(body) is bytes else body_bytes(body)
        self._offset = -1

    @property
    def command(self):
        """The command, e.g. ``"MESSAGE"``."""
        return self._command

    @property
    def headers(self):
        """Every header as ``(name, value)``, in wire order, repeats kept, unescaped."""
        return self._headers

    @property
    def body(self):
        """The body octets."""
        return self._body

    @property
    def offset(self):
        """Stream offset of the first byte of a decoded frame; ``None`` otherwise."""
        return None if self._offset < 0 else self._offset

    def get(self, name, default=None):
        """The value of the first header called ``name``, else ``default``."""
        for pair in self._headers:
            if (<tuple>pair)[0] == name:
                return (<tuple>pair)[1]
        return default

    def get_all(self, name):
        """Every value of the headers called ``name``, in wire order."""
        return [value for key, value in self.headers if key == name]

    def header_map(self):
        """The headers as a dict in which the first entry of each name wins."""
        cdef dict result = {}
        for pair in self._headers:
            PyDict_SetDefault(result, (<tuple>pair)[0], (<tuple>pair)[1])
        return result

    def encode(self, version="1.2", **options):
        """Encode this frame; the options are those of :func:`encode`."""
        return encode(self, version=version, **options)

    def __eq__(self, other):
        if not getattr(other, "__fastframe_frame__", False):
            return NotImplemented
        return self._command == other.command and self._headers == other.headers and self._body == other.body

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return hash((self._command, self._headers, self._body))

    def __repr__(self):
        cdef bytes body = self._body
        shown = repr(body) if len(body) <= 64 else f"<{len(body)} bytes: {body[:48]!r}...>"  # _frames.body_repr
        return f"Frame({self._command!r}, {self._headers!r}, {shown})"

    def __reduce__(self):
        return (Frame, (self.command, self.headers, self.body))


cdef inline bint _exact_pair(object item) noexcept:
    return (type(item) is tuple and len(<tuple>item) == 2 and type((<tuple>item)[0]) is str
            and type((<tuple>item)[1]) is str)


cdef tuple _normalized(object headers):
    """Headers as a tuple of exact-str pairs: a dict, list or tuple of such pairs here, the rest by ``_frames``."""
    cdef Py_ssize_t pos = 0, i = 0
    cdef PyObject *key
    cdef PyObject *value
    cdef tuple out, pair
    if type(headers) is dict:
        out = PyTuple_New(len(<dict>headers))
        # no code of the caller's runs in this loop (exact str keys and values), so the dict cannot change
        while PyDict_Next(headers, &pos, &key, &value):
            if type(<object>key) is not str or type(<object>value) is not str:
                return normalize_headers(headers)
            pair = (<object>key, <object>value)
            Py_INCREF(pair)
            PyTuple_SET_ITEM(out, i, pair)
            i += 1
        return out
    if type(headers) is tuple or type(headers) is list:
        for item in headers:
            if not _exact_pair(item):
                return normalize_headers(headers)
        # the pairs are immutable: shared, not copied
        return <tuple>headers if type(headers) is tuple else PyList_AsTuple(headers)
    return normalize_headers(headers)


cdef inline Frame _make_frame(str command, tuple headers, bytes body, Py_ssize_t offset):
    cdef Frame frame = Frame.__new__(Frame)
    frame._command = command
    frame._headers = headers
    frame._body = body
    frame._offset = offset
    return frame


@cython.final
cdef class Heartbeat:
    """A heart-beat: an EOL between frames (``eol`` is ``b"\\n"`` or ``b"\\r\\n"``).

    Returned by ``feed()`` only when the decoder was made with
    ``heartbeat_events=True``; ``Decoder.heartbeats`` counts them always.
    """

    cdef readonly object offset
    cdef readonly bytes eol

    __fastframe_heartbeat__ = True

    def __init__(self, offset, bytes eol):
        self.offset = offset
        self.eol = eol

    def __eq__(self, other):
        if not getattr(other, "__fastframe_heartbeat__", False):
            return NotImplemented
        return self.offset == other.offset and self.eol == other.eol

    def __hash__(self):
        return hash((self.offset, self.eol))

    def __repr__(self):
        return f"Heartbeat(offset={self.offset}, eol={self.eol!r})"


# ---------------------------------------------------------------- decoder

cdef extern from *:
    """
    #define FASTFRAME_ONES 0x0101010101010101ULL
    #define FASTFRAME_HIGHS 0x8080808080808080ULL
    """
    const unsigned long long ONES "FASTFRAME_ONES"
    const unsigned long long HIGHS "FASTFRAME_HIGHS"


cdef inline unsigned long long _has_byte(unsigned long long word, unsigned long long byte) noexcept:
    cdef unsigned long long x = word ^ (ONES * byte)
    return (x - ONES) & ~x & HIGHS


cdef enum ByteFlags:
    HAS_NUL = 1
    HAS_CR = 2
    HAS_COLON = 4
    HAS_BACKSLASH = 8
    HAS_HIGH = 16


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline int _byte_flags(const unsigned char *p, Py_ssize_t size) noexcept:
    """Which of NUL, CR, ':', backslash and non-ASCII bytes ``p[:size]`` holds."""
    cdef unsigned long long word, high = 0, nul = 0, cr = 0, colon = 0, backslash = 0
    cdef Py_ssize_t i = 0
    cdef int flags = 0
    cdef unsigned char c
    if size < 8:
        for i in range(size):
            c = p[i]
            if c >= 0x80:
                flags |= HAS_HIGH
            elif c == 0:
                flags |= HAS_NUL
            elif c == CR:
                flags |= HAS_CR
            elif c == COLON:
                flags |= HAS_COLON
            elif c == BACKSLASH:
                flags |= HAS_BACKSLASH
        return flags
    while True:  # 8 bytes at a time; the last word may overlap the one before
        memcpy(&word, p + i, 8)
        high |= word & HIGHS
        nul |= _has_byte(word, 0)
        cr |= _has_byte(word, CR)
        colon |= _has_byte(word, COLON)
        backslash |= _has_byte(word, BACKSLASH)
        if i + 8 >= size:
            break
        i = min(i + 8, size - 8)
    if high:
        flags |= HAS_HIGH
    if nul:
        flags |= HAS_NUL
    if cr:
        flags |= HAS_CR
    if colon:
        flags |= HAS_COLON
    if backslash:
        flags |= HAS_BACKSLASH
    return flags


# The escape sets, as byte tables built from _constants (the one place they are
# written): index 0 is STOMP 1.1's set, index 1 is 1.2's. A zero entry means "none".
cdef unsigned char _UNESCAPED[2][256]  # letter after a backslash -> the byte it stands for
cdef unsigned char _ESCAPE_LETTER[2][256]  # byte -> the letter that escapes it
cdef tuple _ESCAPE_SETS = ("1.1", "1.2")


cdef int _fill_escape_tables() except -1:
    cdef int k
    for k in range(2):
        for letter, char in UNESCAPE[_ESCAPE_SETS[k]].items():
            _UNESCAPED[k][ord(letter)] = ord(char)
            _ESCAPE_LETTER[k][ord(char)] = ord(letter)
    return 0


_fill_escape_tables()


cdef int _escape_set(str escapes):
    """The tables' index for an escape set, or -1 for STOMP 1.0 (no escapes)."""
    return _ESCAPE_SETS.index(escapes) if escapes in _ESCAPE_SETS else -1


# ---------------------------------------------------------------- columns
# Rows of frames, kept column by column in growable C buffers, and cut into
# Arrow-layout batches (fastframe._layout.Columns) by take(). A ColumnDecoder
# writes its frames here as it parses them (no Frame, str or tuple is made for
# a clean field); to_columns() fills one from Frame objects.

cdef struct Grow:
    char *data
    Py_ssize_t size  # bytes in use
    Py_ssize_t cap


cdef struct RowEnds:  # one per row; every *_end is where the row ends in its buffer
    long long offset  # the frame's stream offset
    long long command_end
    long long header_end  # in headers
    long long body_end
    long long data_end  # command, names, values and body bytes of the rows so far
    long long dropped_end  # headers left out of the first-wins map so far


cdef struct HeaderEnds:  # one per header
    long long name_end
    long long value_end
    long long keep  # 1: the first header of its name in its row


cdef inline void _init_grow(Grow *grow) noexcept:
    grow.data = NULL
    grow.size = grow.cap = 0


cdef int _reserve_grow(Grow *grow, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap = max(grow.size + more, 2 * grow.cap, 256)
    cdef char *grown = <char *>PyMem_Realloc(grow.data, cap)
    if grown == NULL:
        raise MemoryError()
    grow.data = grown
    grow.cap = cap
    return 0


cdef inline int _extend(Grow *grow, const void *data, Py_ssize_t size) except -1:
    if size == 0:
        return 0  # an empty column has no memory yet: memcpy from or to NULL is undefined even for 0 bytes
    if grow.size + size > grow.cap:
        _reserve_grow(grow, size)
    memcpy(grow.data + grow.size, data, size)
    grow.size += size
    return 0


cdef inline void _drop_front(Grow *grow, Py_ssize_t count) noexcept:
    if count == 0:
        return  # nothing to move, and the buffer may not exist yet (memmove of NULL is undefined)
    memmove(grow.data, grow.data + count, grow.size - count)
    grow.size -= count


cdef inline void _store_le(char *at, unsigned long long value, int width) noexcept:
    # Arrow buffers are little-endian whatever the host; compilers make this one store
    cdef int i
    for i in range(width):
        at[i] = <char>((value >> (8 * i)) & 0xFF)


cdef struct SortContext:  # the header set being sorted, passed along (no module state)
    const char *names  # the names buffer
    HeaderEnds *headers  # the frame's first header
    long long first_start  # where the first name starts in names


cdef int _compare_names(const SortContext *ctx, long long i, long long j) noexcept nogil:
    """Order of the names of headers i and j of the set being sorted: by length, then bytes."""
    cdef long long i0 = ctx.first_start if i == 0 else ctx.headers[i - 1].name_end
    cdef long long j0 = ctx.first_start if j == 0 else ctx.headers[j - 1].name_end
    cdef long long ni = ctx.headers[i].name_end - i0, nj = ctx.headers[j].name_end - j0
    if ni != nj:
        return -1 if ni < nj else 1
    return memcmp(ctx.names + i0, ctx.names + j0, ni)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _sort_by_name(const SortContext *ctx, long long *order, long long *spare, long long count) noexcept nogil:
    """Stable bottom-up merge sort of header indexes by name (equal names keep wire order).

    A merge sort, not qsort: qsort takes no context, and its portable variants differ per platform.
    """
    cdef long long width = 1, lo, mid, hi, a, b, k
    cdef long long *src = order
    cdef long long *dst = spare
    cdef long long *swap
    while width < count:
        lo = 0
        while lo < count:
            mid = min(lo + width, count)
            hi = min(lo + 2 * width, count)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if _compare_names(ctx, src[b], src[a]) < 0:  # strictly less: ties keep the earlier header first
                    dst[k] = src[b]
                    b += 1
                else:
                    dst[k] = src[a]
                    a += 1
                k += 1
            while a < mid:
                dst[k] = src[a]
                a += 1
                k += 1
            while b < hi:
                dst[k] = src[b]
                b += 1
                k += 1
            lo = hi
        swap = src
        src = dst
        dst = swap
        width *= 2
    if src != order:
        memcpy(order, src, count * sizeof(long long))


@cython.final
cdef class _ColumnStore:
    cdef Grow rows_, headers_, commands, names, values, bodies
    cdef Py_ssize_t rows, r0  # rows committed; the first one not taken yet
    cdef Py_ssize_t headers, committed_headers, h0  # headers appended (the frame in progress included)
    cdef long long names_committed, values_committed, data_total, dropped_total
    # where the first row not taken starts, in each buffer
    cdef long long command0, name0, value0, body0, data0, dropped0

    def __cinit__(self):
        _init_grow(&self.rows_)
        _init_grow(&self.headers_)
        _init_grow(&self.commands)
        _init_grow(&self.names)
        _init_grow(&self.values)
        _init_grow(&self.bodies)
        self.clear()

    def __dealloc__(self):
        PyMem_Free(self.rows_.data)
        PyMem_Free(self.headers_.data)
        PyMem_Free(self.commands.data)
        PyMem_Free(self.names.data)
        PyMem_Free(self.values.data)
        PyMem_Free(self.bodies.data)

    cdef void clear(self) noexcept:
        self.rows_.size = self.headers_.size = self.commands.size = 0
        self.names.size = self.values.size = self.bodies.size = 0
        self.rows = self.r0 = self.headers = self.committed_headers = self.h0 = 0
        self.names_committed = self.values_committed = self.data_total = self.dropped_total = 0
        self.command0 = self.name0 = self.value0 = self.body0 = self.data0 = self.dropped0 = 0
        self._give_back()

    cdef void _give_back(self) noexcept:
        # a large frame is gone: its memory goes too
        if self.bodies.size == 0 and self.bodies.cap > (16 << 20):
            PyMem_Free(self.bodies.data)
            self.bodies.data = NULL
            self.bodies.cap = 0

    cdef inline Py_ssize_t pending(self) noexcept:
        return self.rows - self.r0

    cdef inline long long pending_bytes(self) noexcept:
        return self.data_total - self.data0

    cdef void rollback(self) noexcept:
        """Forget the headers of a frame that did not complete."""
        self.headers = self.committed_headers
        self.headers_.size = self.headers * sizeof(HeaderEnds)
        self.names.size = self.names_committed
        self.values.size = self.values_committed

    cdef int add_header(self, const char *name, Py_ssize_t name_size, const char *value, Py_ssize_t value_size) except -1:
        cdef HeaderEnds *ends
        _extend(&self.names, name, name_size)
        _extend(&self.values, value, value_size)
        if self.headers_.size + <Py_ssize_t>sizeof(HeaderEnds) > self.headers_.cap:
            _reserve_grow(&self.headers_, sizeof(HeaderEnds))
        ends = <HeaderEnds *>(self.headers_.data + self.headers_.size)  # written in place: no memcpy call
        ends.name_end = self.names.size
        ends.value_end = self.values.size
        ends.keep = 1
        self.headers_.size += sizeof(HeaderEnds)
        self.headers += 1
        return 0

    cdef int commit(self, const char *command, Py_ssize_t command_size, const char *body, Py_ssize_t body_size,
                    long long offset) except -1:
        """The frame in progress is complete: its headers and these make a row."""
        cdef RowEnds ends
        cdef long long data = command_size + body_size
        data += (self.names.size - self.names_committed) + (self.values.size - self.values_committed)
        if self.headers - self.committed_headers > 1:
            self.dropped_total += self._mark_repeats()
        _extend(&self.commands, command, command_size)
        _extend(&self.bodies, body, body_size)
        self.data_total += data
        ends.offset = offset
        ends.command_end = self.commands.size
        ends.header_end = self.headers
        ends.body_end = self.bodies.size
        ends.data_end = self.data_total
        ends.dropped_end = self.dropped_total
        _extend(&self.rows_, &ends, sizeof(RowEnds))
        self.rows += 1
        self.committed_headers = self.headers
        self.names_committed = self.names.size
        self.values_committed = self.values.size
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef long long _mark_repeats(self) except -1:
        """Clear ``keep`` on each header of the frame in progress whose name came earlier in it."""
        cdef HeaderEnds *headers = <HeaderEnds *>self.headers_.data
        cdef long long first = self.committed_headers, count = self.headers - first
        cdef long long start = self.names_committed, i, j, size, i0, j0, dropped = 0
        cdef long long *order
        cdef SortContext ctx
        cdef long long starts[16]
        cdef unsigned long long prints[16]  # length and first and last byte: a cheap first comparison
        cdef const unsigned char *name
        if count <= 16:  # pairwise: fewer steps than sorting for the usual handful of headers
            for i in range(count):
                starts[i] = start if i == 0 else headers[first + i - 1].name_end
                size = headers[first + i].name_end - starts[i]
                name = <const unsigned char *>self.names.data + starts[i]
                prints[i] = <unsigned long long>size << 16 | (<unsigned long long>name[0] << 8 | name[size - 1] if size else 0)
            for j in range(1, count):
                for i in range(j):
                    if prints[i] == prints[j] and memcmp(
                        self.names.data + starts[i], self.names.data + starts[j], prints[j] >> 16
                    ) == 0:
                        headers[first + j].keep = 0
                        dropped += 1
                        break
            return dropped
        # sorted by (length, bytes, position): O(n log n) however the names collide
        order = <long long *>PyMem_Malloc(2 * count * sizeof(long long))  # the order, and the sort's spare
        if order == NULL:
            raise MemoryError()
        try:
            for i in range(count):
                order[i] = i
            ctx.names = self.names.data
            ctx.headers = headers + first
            ctx.first_start = start
            _sort_by_name(&ctx, order, order + count, count)
            for i in range(1, count):
                if _compare_names(&ctx, order[i - 1], order[i]) == 0:
                    headers[first + order[i]].keep = 0
                    dropped += 1
        finally:
            PyMem_Free(order)
        return dropped

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef object take(self, Py_ssize_t max_rows, long long max_bytes):
        """The first rows not taken yet, at most ``max_rows`` and ``max_bytes`` of data (one row at least)."""
        cdef RowEnds *rows = <RowEnds *>self.rows_.data
        cdef HeaderEnds *headers = <HeaderEnds *>self.headers_.data
        cdef Py_ssize_t k = min(self.rows - self.r0, max_rows), lo, hi, mid, i, h_end, count
        cdef RowEnds *last
        cdef char *out
        cdef char *more
        cdef long long dropped, name_end, value_end
        if k <= 0:
            return _EMPTY_COLUMNS
        if rows[self.r0 + k - 1].data_end - self.data0 > max_bytes:
            lo, hi = 0, k - 1  # the answer is in [lo, hi]: rows r0 .. r0 + answer - 1 fit
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if rows[self.r0 + mid - 1].data_end - self.data0 <= max_bytes:
                    lo = mid
                else:
                    hi = mid - 1
            k = max(lo, 1)
        last = &rows[self.r0 + k - 1]
        if (last.command_end - self.command0 > MAX_COLUMN or last.body_end - self.body0 > MAX_COLUMN
                or (last.header_end > self.h0 and (
                    headers[last.header_end - 1].name_end - self.name0 > MAX_COLUMN
                    or headers[last.header_end - 1].value_end - self.value0 > MAX_COLUMN))):
            raise OverflowError(ROW_TOO_LARGE)
        h_end = last.header_end
        count = h_end - self.h0
        frame_offsets = PyBytes_FromStringAndSize(NULL, 8 * k)
        out = PyBytes_AS_STRING(frame_offsets)
        for i in range(k):
            _store_le(out + 8 * i, <unsigned long long>rows[self.r0 + i].offset, 8)
        command_offsets = self._row_offsets(rows, k, 0)
        header_offsets = self._row_offsets(rows, k, 1)
        body_offsets = self._row_offsets(rows, k, 2)
        name_offsets = PyBytes_FromStringAndSize(NULL, 4 * (count + 1))
        value_offsets = PyBytes_FromStringAndSize(NULL, 4 * (count + 1))
        out = PyBytes_AS_STRING(name_offsets)
        more = PyBytes_AS_STRING(value_offsets)
        _store_le(out, 0, 4)
        _store_le(more, 0, 4)
        for i in range(count):
            _store_le(out + 4 * (i + 1), <unsigned long long>(headers[self.h0 + i].name_end - self.name0), 4)
            _store_le(more + 4 * (i + 1), <unsigned long long>(headers[self.h0 + i].value_end - self.value0), 4)
        name_end = headers[h_end - 1].name_end if count else self.name0
        value_end = headers[h_end - 1].value_end if count else self.value0
        map_offsets = map_keep = None
        dropped = last.dropped_end - self.dropped0
        if dropped:
            map_offsets = self._row_offsets(rows, k, 3)
            map_keep = PyBytes_FromStringAndSize(NULL, count)
            out = PyBytes_AS_STRING(map_keep)
            for i in range(count):
                out[i] = <char>headers[self.h0 + i].keep
        columns = Columns(
            k,
            frame_offsets,
            command_offsets,
            PyBytes_FromStringAndSize(self.commands.data + self.command0, last.command_end - self.command0),
            header_offsets,
            name_offsets,
            PyBytes_FromStringAndSize(self.names.data + self.name0, name_end - self.name0),
            value_offsets,
            PyBytes_FromStringAndSize(self.values.data + self.value0, value_end - self.value0),
            body_offsets,
            PyBytes_FromStringAndSize(self.bodies.data + self.body0, last.body_end - self.body0),
            map_offsets,
            map_keep,
        )
        # the rows taken are gone
        self.r0 += k
        self.h0 = h_end
        self.command0, self.body0, self.data0, self.dropped0 = (
            last.command_end, last.body_end, last.data_end, last.dropped_end
        )
        self.name0 = name_end
        self.value0 = value_end
        if 2 * self.r0 >= self.rows:
            self._compact()
        return columns

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef bytes _row_offsets(self, RowEnds *rows, Py_ssize_t k, int which):
        """int32 offsets of rows r0 .. r0 + k - 1 into commands (0), headers (1), bodies (2) or the map (3)."""
        cdef bytes result = PyBytes_FromStringAndSize(NULL, 4 * (k + 1))
        cdef char *out = PyBytes_AS_STRING(result)
        cdef RowEnds *row
        cdef long long value
        cdef Py_ssize_t i
        _store_le(out, 0, 4)
        for i in range(k):
            row = &rows[self.r0 + i]
            if which == 0:
                value = row.command_end - self.command0
            elif which == 1:
                value = row.header_end - self.h0
            elif which == 2:
                value = row.body_end - self.body0
            else:
                value = (row.header_end - self.h0) - (row.dropped_end - self.dropped0)
            _store_le(out + 4 * (i + 1), <unsigned long long>value, 4)
        return result

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef void _compact(self) noexcept:
        """Move what is not taken (and the frame in progress) to the front of every buffer."""
        cdef RowEnds *rows
        cdef HeaderEnds *headers
        cdef Py_ssize_t i
        _drop_front(&self.rows_, self.r0 * sizeof(RowEnds))
        _drop_front(&self.headers_, self.h0 * sizeof(HeaderEnds))
        _drop_front(&self.commands, self.command0)
        _drop_front(&self.names, self.name0)
        _drop_front(&self.values, self.value0)
        _drop_front(&self.bodies, self.body0)
        self.rows -= self.r0
        self.headers -= self.h0
        self.committed_headers -= self.h0
        rows = <RowEnds *>self.rows_.data
        for i in range(self.rows):
            rows[i].command_end -= self.command0
            rows[i].header_end -= self.h0
            rows[i].body_end -= self.body0
            rows[i].data_end -= self.data0
            rows[i].dropped_end -= self.dropped0
        headers = <HeaderEnds *>self.headers_.data
        for i in range(self.headers):
            headers[i].name_end -= self.name0
            headers[i].value_end -= self.value0
        self.names_committed -= self.name0
        self.values_committed -= self.value0
        self.data_total -= self.data0
        self.dropped_total -= self.dropped0
        self.r0 = self.h0 = 0
        self.command0 = self.name0 = self.value0 = self.body0 = self.data0 = self.dropped0 = 0
        self._give_back()


cdef object _EMPTY_COLUMNS = Columns(0, b"", b"\0\0\0\0", b"", b"\0\0\0\0", b"\0\0\0\0", b"", b"\0\0\0\0", b"",
                                     b"\0\0\0\0", b"", None, None)


cdef class Decoder:
    """Incremental, sans-I/O STOMP frame decoder.

    ``feed(data)`` takes bytes-like data split anywhere and returns the frames
    (and, with ``heartbeat_events=True``, :class:`Heartbeat` events) completed
    by it; ``get_buffer()`` and ``buffer_updated(nbytes)`` do the same for bytes
    written into a buffer the decoder lends (``asyncio.BufferedProtocol``).
    ``close()`` reports a stream that ended inside a frame. On
    malformed input ``feed()`` raises a :class:`DecodeError` subclass whose
    ``frames`` attribute holds what the same call completed before the bad
    byte; the decoder then refuses input until :meth:`reset`.

    See the README for every option and its default.
    """

    cdef readonly object options
    cdef readonly str version
    cdef readonly Py_ssize_t heartbeats
    # options, unpacked
    cdef bint strict, colon_ok, bare_cr_ok, missing_colon_ok, keep_undefined, events
    cdef int escape_set  # the escape tables' index, -1 for STOMP 1.0 (none)
    cdef object escape_letters  # bytes, or None when undefined escapes are not checked
    cdef object commands  # frozenset: commands of the version (strict mode)
    cdef Py_ssize_t max_count, max_line, max_body, max_frame
    # the buffer: bytes not yet consumed, held between feed() calls
    cdef unsigned char *buf
    cdef Py_ssize_t cap, end, pos, base  # base: stream offset of index 0
    cdef const unsigned char *cur  # what is being parsed: buf, or the caller's data
    cdef Py_ssize_t _cur_end  # its length
    cdef const unsigned char *rest  # the caller's bytes not appended yet (see _finish_buffered): for excerpts
    cdef Py_ssize_t rest_size
    # the frame in progress (indexes into cur)
    cdef Phase phase
    cdef Py_ssize_t fs, ls, scan, bs, bscan, cl
    cdef str command
    cdef bint escaped
    cdef PyObject **pairs  # the (name, value) tuples of the frame in progress (owned)
    cdef Py_ssize_t n_pairs, pairs_cap
    cdef CacheSlot cache[CACHE_SLOTS]  # short names and values seen lately (16 KiB)
    cdef PairSlot pair_cache[PAIR_SLOTS]  # (name, value) tuples seen lately
    cdef object error
    # a ColumnDecoder writes its rows here instead of making Frame objects
    cdef bint columnar
    cdef _ColumnStore store
    # scratch space for unescaping
    cdef char *scratch
    cdef Py_ssize_t scratch_cap
    # True while a call runs: a second call (another thread, a finalizer) raises instead of
    # touching the buffer, so the raw pointers a call holds stay valid across its calls into Python
    cdef bint busy
    # what get_buffer() lends: a bytearray, never resized (a view of it stays valid memory
    # while the view lives), replaced by a larger one when a larger one is asked for
    cdef bytearray recv
    cdef Py_ssize_t lent  # its size as lent, -1 when none is lent
    # a large body arriving in pieces goes straight into the bytes object the frame will hold
    # (owned, never seen by Python until complete, so it may be resized), not into buf: one
    # copy per body byte. Its capacity stays within twice what arrived: a content-length
    # alone reserves nothing (see _start_sink).
    cdef PyObject *sink
    cdef Py_ssize_t sunk, sink_cap  # body bytes in it; its size

    def __cinit__(self):
        cdef Py_ssize_t size
        self.buf = NULL
        self.scratch = NULL
        self.pairs = NULL
        self.n_pairs = self.pairs_cap = 0
        cdef int i
        for i in range(CACHE_SLOTS):
            self.cache[i].text = NULL
            self.cache[i].size = -1  # matches no field
        for i in range(PAIR_SLOTS):
            self.pair_cache[i].pair = self.pair_cache[i].name = self.pair_cache[i].value = NULL
        for name in COMMON_HEADER_NAMES:
            self._remember(<const unsigned char *>PyUnicode_AsUTF8AndSize(name, &size), size, name)

    def __dealloc__(self):
        cdef int i
        self._drop_pairs()
        PyMem_Free(self.pairs)
        for i in range(CACHE_SLOTS):
            Py_XDECREF(self.cache[i].text)
        for i in range(PAIR_SLOTS):
            Py_XDECREF(self.pair_cache[i].pair)
        PyMem_Free(self.buf)
        PyMem_Free(self.scratch)
        Py_XDECREF(self.sink)

    cdef void _drop_pairs(self) noexcept:
        if self.columnar:  # the headers are in the store, not in pairs
            self.n_pairs = 0
            if self.store is not None:
                self.store.rollback()
            return
        while self.n_pairs:
            self.n_pairs -= 1
            Py_DECREF(<object>self.pairs[self.n_pairs])

    cdef int _enter(self, str method) except -1:
        # The check and the set are adjacent, with no Python call between: with the GIL
        # nothing runs in between. A plain flag is not atomic on a free-threaded build
        # (a later issue declares free-threading; until then the interpreter keeps the GIL
        # on for this module).
        if self.busy:
            raise RuntimeError(REENTRANT_CALL.format(type(self).__name__, method))
        self.busy = True
        return 0

    def __init__(self, version="1.2", **options):
        self._enter("__init__")
        try:
            self._configure(version, options)
            self._reset()
        finally:
            self.busy = False

    cdef int _configure(self, version, dict options) except -1:
        opts = decoder_options(version, **options)
        self.options = opts
        self.version = opts.version
        self.strict = opts.strict
        self.commands = COMMANDS_BY_VERSION[opts.version]
        self.escape_set = _escape_set(opts.escapes)
        letters = "".join(UNESCAPE[opts.escapes]).encode()
        self.escape_letters = letters if letters and not opts.keep_undefined_escapes else None
        self.colon_ok = opts.allow_colon_in_value
        self.bare_cr_ok = opts.allow_bare_cr
        self.missing_colon_ok = opts.allow_missing_colon
        self.keep_undefined = opts.keep_undefined_escapes
        self.max_count = opts.max_header_count
        self.max_line = opts.max_line_length
        self.max_body = opts.max_body_size
        self.max_frame = opts.max_frame_size
        self.events = opts.heartbeat_events
        return 0

    def reset(self):
        """Forget everything: buffered bytes, counters, a pending error."""
        self._enter("reset")
        try:
            self._reset()
        finally:
            self.busy = False

    cdef int _reset(self) except -1:
        self.lent = -1
        self._drop_sink()
        PyMem_Free(self.buf)
        self.buf = NULL
        self.cap = self.end = self.pos = self.base = 0
        self.phase = BETWEEN
        self.error = None
        self.heartbeats = 0
        self._start_frame(0)
        if self.columnar:
            self.store.clear()
        return 0

    cdef inline void _start_frame(self, Py_ssize_t index):
        self.fs = self.ls = self.scan = index
        self.command = None
        self.escaped = True
        self._drop_pairs()
        self.cl = self.bs = self.bscan = -1

    @property
    def bytes_fed(self):
        """Total number of bytes fed since creation or the last reset."""
        return self.base + self.end + self.sunk

    @property
    def buffered(self):
        """Bytes held for an incomplete frame."""
        return self.end - self.pos + self.sunk

    def feed(self, data):
        """Add bytes; return the frames (and heart-beat events) completed so far."""
        cdef list out = []
        self._feed(data, out)
        return out

    def get_buffer(self, sizehint=-1):
        """A writable buffer for the next bytes (at least 1 byte; 64 KiB when ``sizehint`` <= 0).

        Write the stream's next bytes at its start, then call
        :meth:`buffer_updated` with their number: together they are
        ``asyncio.BufferedProtocol``'s pair. The buffer belongs to the decoder and
        is reused: write into the one most recently returned, once.
        """
        cdef Py_ssize_t size = receive_size(sizehint)
        self._enter("get_buffer")
        try:
            if self.recv is None or len(self.recv) < size:
                # a new bytearray: a view of the old one stays valid memory while it lives
                self.recv = bytearray(size)
            self.lent = len(self.recv)
            return memoryview(self.recv)
        finally:
            self.busy = False

    def buffer_updated(self, nbytes):
        """``nbytes`` bytes were written into the buffer from :meth:`get_buffer`: what ``feed()`` of them returns."""
        cdef list out = []
        self._received(nbytes, out)
        return out

    cdef int _received(self, nbytes, list out) except -1:
        cdef Py_ssize_t size
        self._enter("buffer_updated")
        try:
            size = received_size(nbytes, self.lent)
            self.lent = -1  # a buffer lent is filled once
            # parsed where the transport wrote it: only an incomplete frame's bytes are copied
            self._feed_buffer(memoryview(self.recv)[:size], out)
        finally:
            self.busy = False
        return 0

    cdef int _feed(self, data, list out) except -1:
        self._enter("feed")
        try:
            self._feed_buffer(data, out)
        finally:
            self.busy = False
        return 0

    cdef int _feed_buffer(self, data, list out) except -1:
        cdef Py_buffer view
        cdef const unsigned char *p
        cdef Py_ssize_t size, taken
        if self.error is not None:
            raise self._repeat_error()
        if not PyObject_CheckBuffer(data):
            raise TypeError(NOT_BYTES.format(type(data).__name__))
        # the request memoryview(data) makes, so both twins get the same errors from the exporter
        PyObject_GetBuffer(data, &view, PyBUF_FULL_RO)
        try:
            if not PyBuffer_IsContiguous(&view, b'C'):
                raise BufferError(NOT_CONTIGUOUS)
            if view.len == 0:
                return 0
            p = <const unsigned char *>view.buf
            size = view.len
            if self.sink != NULL:
                taken = self._fill_sink(p, size, out)
                p += taken
                size -= taken
                if size == 0:
                    return 0
            if self.pos == self.end:
                # nothing buffered: parse the caller's bytes in place, keep only the tail
                self.base += self.end
                self.pos = self.end = 0
                self._run_in_place(p, size, out)
            else:
                self._finish_buffered(p, size, out)
            self._start_sink()
        except FrameError as error:
            error.frames = out
            self.error = error
            raise
        finally:
            PyBuffer_Release(&view)
        return 0

    cdef void _drop_sink(self) noexcept:
        cdef PyObject *sink = self.sink
        self.sink = NULL
        self.sunk = self.sink_cap = 0
        Py_XDECREF(sink)

    cdef int _size_sink(self, Py_ssize_t size) except -1:
        cdef object fresh
        if self.sink == NULL:
            fresh = PyBytes_FromStringAndSize(NULL, size)
            Py_INCREF(fresh)
            self.sink = <PyObject *>fresh
        else:
            _PyBytes_Resize(&self.sink, size)  # a realloc: large blocks grow without a copy (mremap)
        self.sink_cap = size
        return 0

    cdef int _start_sink(self) except -1:
        """After a feed: a large body still incomplete moves out of buf, into the frame's own bytes."""
        cdef Py_ssize_t have
        if self.phase != BODY or self.cl < SINK_MIN or self.sink != NULL:
            return 0
        have = self.end - self.bs
        if have < RADIUS or have > self.cl:  # an excerpt must never need bytes before bs
            return 0
        self._size_sink(min(self.cl, max(2 * have, SINK_MIN)))
        memcpy(PyBytes_AS_STRING(<object>self.sink), self.buf + self.bs, have)
        self.sunk = have
        self.end = self.bs  # the head stays in buf
        return 0

    cdef Py_ssize_t _fill_sink(self, const unsigned char *data, Py_ssize_t size, list out) except -1:
        """Copy body bytes straight into the sink; at the NUL, the frame. Returns the bytes consumed."""
        cdef Py_ssize_t n = min(self.cl - self.sunk, size), nul_at, hi
        cdef char *into
        cdef const char *command
        cdef Py_ssize_t command_size
        cdef tuple headers
        if self.sunk + n > self.sink_cap:
            self._size_sink(min(self.cl, max(self.sunk + n, 2 * self.sink_cap)))
        into = PyBytes_AS_STRING(<object>self.sink)
        memcpy(into + self.sunk, data, n)
        self.sunk += n
        if n == size:
            return n
        nul_at = self.base + self.bs + self.cl  # the stream offset of the byte after the body
        if data[n] != 0:
            hi = min(n + RADIUS, size)
            window = PyBytes_FromStringAndSize(into + self.cl - RADIUS, RADIUS)
            window += PyBytes_FromStringAndSize(<const char *>data + n, hi - n)
            self._append(data + n, size - n)  # fed is fed: counted as buffered, as in the Python twin
            raise make_decode_error(
                MissingNullError, MISSING_NULL.format(self.cl), nul_at, window, nul_at - RADIUS,
                self.base + self.fs, nul_at + hi - n, "",
            )
        if self.columnar:
            command = PyUnicode_AsUTF8AndSize(self.command, &command_size)
            self.store.commit(command, command_size, into, self.cl, self.base + self.fs)
            self.n_pairs = 0  # the store has them
            self._drop_sink()
        else:
            headers = self._take_pairs()
            PyObject_GC_UnTrack(<void *>headers)  # holds only (str, str) pairs
            body = <object>self.sink  # the frame's reference; the sink's own goes below
            self.sink = NULL
            self.sunk = self.sink_cap = 0
            Py_DECREF(body)
            out.append(_make_frame(self.command, headers, <bytes>body, self.base + self.fs))
        # the frame is consumed: what follows its NUL starts a new buffer
        self.base = nul_at + 1
        self.pos = self.end = 0
        self.phase = BETWEEN
        self._start_frame(0)
        return n + 1

    cdef int _run_in_place(self, const unsigned char *data, Py_ssize_t size, list out) except -1:
        """Parse the caller's bytes where they are (``pos`` indexes them); keep only the unconsumed tail."""
        self.end = 0
        self.cur = data
        try:
            self._run(size, out)
        finally:
            self._keep_tail(data, size)
        return 0

    cdef int _finish_buffered(self, const unsigned char *data, Py_ssize_t size, list out) except -1:
        """Bytes are buffered: append only as much of ``data`` as consumes them, then parse the rest in place.

        Pieces double from 4 KiB (or the buffered size), so a frame that ends
        early in ``data`` does not make all of it be copied, and no byte is
        scanned twice (the parser resumes where it stopped).
        """
        cdef Py_ssize_t taken = 0, at, piece = max(4096, self.end - self.pos)
        try:
            while True:
                piece = min(piece, size - taken)
                self._append(data + taken, piece)
                taken += piece
                self.cur = self.buf
                self.rest = data + taken
                self.rest_size = size - taken
                self._run(self.end, out)
                at = self.end - taken  # where data[0] is in buf (an _append may have moved it)
                if taken == size:
                    self._compact()
                    return 0
                if self.pos >= at:
                    break
                piece *= 2
        except FrameError:
            self._append(data + taken, size - taken)  # fed is fed: counted as buffered, as when it all was
            self._compact()
            raise
        finally:
            self.rest_size = 0
        # what is unconsumed starts inside data: renumber from data[0] and go on in place
        self._renumber(at)
        self._run_in_place(data, size, out)
        return 0

    def close(self):
        """Declare the end of the stream; raise TruncatedError inside a frame."""
        self._enter("close")
        try:
            self._close()
        finally:
            self.busy = False

    cdef int _close(self) except -1:
        if self.error is not None:
            raise self._repeat_error()
        if self.pos < self.end:
            self.cur = self.buf
            self._cur_end = self.end
            what = "a frame" if self.phase != BETWEEN else "an EOL"
            try:
                if self.sink != NULL:  # the stream ends inside a large body: the excerpt is the sink's last bytes
                    end = self.base + self.end + self.sunk
                    raise make_decode_error(
                        TruncatedError, TRUNCATED.format(what, self.base + self.pos), end,
                        PyBytes_FromStringAndSize(PyBytes_AS_STRING(<object>self.sink) + self.sunk - RADIUS, RADIUS),
                        end - RADIUS, self.base + self.fs, end, "",
                    )
                self._fail(TruncatedError, TRUNCATED.format(what, self.base + self.pos), self.end, self.pos, "")
            except FrameError as error:
                self.error = error
                raise
        return 0

    # -- buffer ----------------------------------------------------------------

    cdef int _reserve(self, Py_ssize_t size) except -1:
        cdef Py_ssize_t cap
        cdef unsigned char *grown
        if size <= self.cap:
            return 0
        cap = max(size, 2 * self.cap, 4096)
        grown = <unsigned char *>PyMem_Realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.cap = cap
        return 0

    cdef int _append(self, const unsigned char *data, Py_ssize_t size) except -1:
        if self.end + size > self.cap and self.pos > 0:
            self._shift(self.pos)  # make room by dropping consumed bytes first
        self._reserve(self.end + size)
        memcpy(self.buf + self.end, data, size)
        self.end += size
        return 0

    cdef void _shift(self, Py_ssize_t shift) noexcept:
        """Drop the first ``shift`` (consumed) bytes and renumber the indexes."""
        memmove(self.buf, self.buf + shift, self.end - shift)
        self._renumber(shift)
        self.end -= shift

    cdef inline void _renumber(self, Py_ssize_t shift) noexcept:
        self.base += shift
        self.pos -= shift
        if self.phase != BETWEEN:
            self.fs -= shift
            self.ls -= shift
            self.scan -= shift
            if self.bs >= 0:
                self.bs -= shift
                self.bscan -= shift

    cdef int _keep_tail(self, const unsigned char *data, Py_ssize_t size) except -1:
        """After parsing the caller's bytes in place: copy what is unconsumed."""
        cdef Py_ssize_t shift = self.pos
        self._renumber(shift)
        self.end = size - shift
        if self.end:
            self._reserve(self.end)
            memcpy(self.buf, data + shift, self.end)
        elif self.cap > 65536:
            PyMem_Free(self.buf)  # a large frame is gone: give its memory back
            self.buf = NULL
            self.cap = 0
        return 0

    cdef void _compact(self) noexcept:
        if self.pos == self.end:
            self.base += self.end
            self.pos = self.end = 0
            if self.cap > 65536:
                PyMem_Free(self.buf)
                self.buf = NULL
                self.cap = 0
        elif self.pos > (self.end >> 1):
            # move the tail only when it is smaller than what is dropped:
            # a large body is not moved again and again
            self._shift(self.pos)

    # -- errors ----------------------------------------------------------------

    def _repeat_error(self):
        constructor, args = self.error.__reduce__()[:2]
        again = constructor(*args)
        again.frames = []
        return again

    cdef bytes _window(self, Py_ssize_t lo, Py_ssize_t hi):
        """A copy of the bytes at ``[lo, hi)`` of what is parsed, going on into the bytes not appended yet."""
        cdef Py_ssize_t cut = self._cur_end
        cdef bytes window
        cdef char *w
        hi = min(hi, cut + self.rest_size)
        if hi <= lo:
            return b""
        window = PyBytes_FromStringAndSize(NULL, hi - lo)
        w = PyBytes_AS_STRING(window)
        if lo < cut:
            memcpy(w, self.cur + lo, min(hi, cut) - lo)
        if hi > cut:
            memcpy(w + max(cut - lo, 0), self.rest + max(lo - cut, 0), hi - max(lo, cut))
        return window

    cdef int _fail(self, cls, str reason, Py_ssize_t index, Py_ssize_t floor, str limit) except -1:
        cdef Py_ssize_t lo = max(index - 16, floor)
        # the excerpt is copied before any call into Python
        self._fail_near(self._window(lo, index + 16), lo, cls, reason, index, floor, limit)
        return 0

    cdef int _fail_near(self, bytes window, Py_ssize_t window_lo, cls, str reason, Py_ssize_t index,
                        Py_ssize_t floor, str limit) except -1:
        """Raise the error, its excerpt cut from ``window`` (a copy of the bytes from ``window_lo`` on)."""
        cdef Py_ssize_t base = self.base
        cdef Py_ssize_t lo = max(index - 16, floor)
        cdef Py_ssize_t hi = min(index + 16, window_lo + len(window))
        raise make_decode_error(cls, reason, base + index, window, base + window_lo, base + floor, base + hi, limit)

    # -- parsing ---------------------------------------------------------------

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _run(self, Py_ssize_t end, list out) except -1:
        cdef const unsigned char *b = self.cur
        cdef Py_ssize_t pos
        cdef unsigned char c
        cdef bint started
        self._cur_end = end
        while True:
            if self.phase == BETWEEN:
                pos = self.pos
                started = False
                while pos < end:
                    c = b[pos]
                    if c == LF:
                        self.heartbeats += 1
                        if self.events:
                            out.append(Heartbeat(self.base + pos, EOL_LF))
                        pos += 1
                    elif c == CR:
                        if pos + 1 == end:
                            break  # a lone CR: an EOL or a bad command, the next byte tells
                        if b[pos + 1] != LF:
                            started = True
                            break
                        self.heartbeats += 1
                        if self.events:
                            out.append(Heartbeat(self.base + pos, EOL_CRLF))
                        pos += 2
                    else:
                        started = True
                        break
                self.pos = pos
                if not started:
                    return 0
                self._start_frame(pos)
                self.phase = HEAD
            if self.phase == HEAD:
                if not self._head(b, end):
                    return 0
            if not self._body(b, end, out):
                return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef bint _head(self, const unsigned char *b, Py_ssize_t end) except -1:
        """Parse head lines, resuming where the last call stopped; True when complete."""
        cdef Py_ssize_t ls, lf, content_end, avail
        cdef Py_ssize_t frame_limit = self.fs + self.max_frame
        cdef const unsigned char *hit
        while True:
            ls = self.ls
            hit = <const unsigned char *>memchr(b + self.scan, LF, end - self.scan)
            if hit == NULL:
                self.scan = end
                # a CR at the very end may be half of an EOL: judge the line without it
                avail = end - 1 if end > ls and b[end - 1] == CR else end
                self._check_line_limits(ls, avail, avail > frame_limit)
                return False
            lf = hit - b
            content_end = lf - 1 if lf > ls and b[lf - 1] == CR else lf
            if (content_end - ls > self.max_line or lf >= frame_limit
                    or (self.n_pairs >= self.max_count and content_end > ls and self.command is not None)):
                self._check_line_limits(ls, content_end, lf >= frame_limit)
            if self.command is None:
                self._parse_command(b, ls, content_end)
            elif content_end == ls:
                self.ls = self.scan = lf + 1
                self._begin_body(lf + 1)
                return True
            else:
                self._parse_header(b, ls, content_end)
            self.ls = self.scan = lf + 1

    cdef int _check_line_limits(self, Py_ssize_t ls, Py_ssize_t content_end, bint frame_exceeded) except -1:
        cdef Py_ssize_t fs = self.fs
        cdef Py_ssize_t line_at, frame_at
        cdef bint line_exceeded
        if self.command is not None and content_end > ls and self.n_pairs >= self.max_count:
            self._fail(LimitExceededError, TOO_MANY_HEADERS.format(self.max_count), ls, fs, "max_header_count")
        line_exceeded = content_end - ls > self.max_line
        if line_exceeded or frame_exceeded:
            line_at = ls + self.max_line
            frame_at = fs + self.max_frame
            if line_exceeded and (not frame_exceeded or line_at <= frame_at):
                self._fail(LimitExceededError, LINE_TOO_LONG.format(self.max_line), line_at, fs, "max_line_length")
            self._fail(LimitExceededError, FRAME_TOO_LARGE.format(self.max_frame), frame_at, fs, "max_frame_size")
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _parse_command(self, const unsigned char *b, Py_ssize_t ls, Py_ssize_t content_end) except -1:
        cdef Py_ssize_t size = content_end - ls
        cdef Py_ssize_t i
        cdef object command = _lookup(_commands, _n_commands, <const char *>b + ls, size)
        if command is None:
            for i in range(ls, content_end):
                if b[i] == 0 or b[i] == CR:
                    break
            else:
                try:
                    command = PyUnicode_DecodeUTF8(<char *>b + ls, size, NULL)
                except UnicodeDecodeError:
                    command = None
            if command is None or (self.strict and command not in self.commands):
                self._command_error(ls, content_end)
        elif self.strict and command not in self.commands:  # NACK or STOMP in 1.0
            self._command_error(ls, content_end)
        self.command = command
        self.escaped = command not in UNESCAPED_COMMANDS
        return 0

    cdef int _command_error(self, Py_ssize_t ls, Py_ssize_t content_end) except -1:
        """Raise the reference error for a command line this twin found fault with."""
        # copies first: nothing reads the buffer after the call into Python
        cdef Py_ssize_t fs = self.fs, lo = max(ls - 16, fs)
        cdef bytes window = self._window(lo, content_end + 16)
        line = window[ls - lo : content_end - lo]
        problem = command_problem(line, self.strict, self.commands, self.version)
        self._fail_near(window, lo, problem[1], problem[2], ls + problem[0], fs, problem[3])
        return 0

    cdef int _diagnose(self, const unsigned char *b, Py_ssize_t ls, Py_ssize_t content_end) except -1:
        """Raise the reference error for a header line this twin found fault with."""
        # copies first: nothing reads the buffer after the call into Python
        cdef Py_ssize_t fs = self.fs, lo = max(ls - 16, fs)
        cdef bytes window = self._window(lo, content_end + 16)
        line = window[ls - lo : content_end - lo]
        problem = header_problem(
            line,
            escape_letters=self.escape_letters if self.escaped else None,
            colon_ok=self.colon_ok or not self.escaped,
            bare_cr_ok=self.bare_cr_ok,
            missing_colon_ok=self.missing_colon_ok,
            content_length_max=self.max_body if self.cl < 0 else -1,
        )
        if problem is None:
            raise RuntimeError(f"fastframe twins disagree about header line {line!r}")  # a bug
        self._fail_near(window, lo, problem[1], problem[2], ls + problem[0], fs, problem[3])
        return 0

    cdef char *_scratch(self, Py_ssize_t size) except NULL:
        cdef char *grown
        if size > self.scratch_cap:
            grown = <char *>PyMem_Realloc(self.scratch, max(size, 256))
            if grown == NULL:
                raise MemoryError()
            self.scratch = grown
            self.scratch_cap = max(size, 256)
        return self.scratch

    cdef inline CacheSlot *_slot_of(self, const unsigned char *p, Py_ssize_t size) noexcept:
        return &self.cache[_slot(_load8(p, size), p, size)]

    cdef void _remember(self, const unsigned char *p, Py_ssize_t size, str text) noexcept:
        cdef CacheSlot *slot = self._slot_of(p, size)
        cdef PyObject *old = slot.text
        Py_INCREF(text)
        slot.text = <PyObject *>text
        slot.size = size
        memcpy(slot.raw, p, size)
        Py_XDECREF(old)  # last: a finalizer it runs finds the slot whole

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef object _field(self, const unsigned char *p, Py_ssize_t size, bint backslash, bint unescape, bint high):
        """Decode one name or value; None when it has an undefined escape or bad UTF-8.

        Short fields come from the cache when their bytes were seen lately; a
        field whose backslashes are kept as they are (CONNECT, STOMP 1.0) is
        not cached, as the same bytes unescape elsewhere.
        """
        cdef CacheSlot *slot
        cdef bint cacheable = size <= CACHE_MAX_SIZE and (unescape or not backslash)
        if size == 0:
            return ""
        if cacheable:
            slot = self._slot_of(p, size)
            if slot.size == size and memcmp(slot.raw, p, size) == 0:
                return <object>slot.text
        if backslash and unescape:
            text = self._unescape(p, size, high)
        elif high:
            try:
                text = PyUnicode_DecodeUTF8(<char *>p, size, NULL)
            except UnicodeDecodeError:
                return None
        else:
            text = _ascii(p, size)
        if cacheable and text is not None:
            self._remember(p, size, text)
        return text

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef object _unescape(self, const unsigned char *p, Py_ssize_t size, bint high):
        cdef Py_ssize_t i = 0, n = 0
        cdef char *out = self._scratch(size)
        cdef unsigned char c
        while i < size:
            c = p[i]
            if c == BACKSLASH:
                if i + 1 < size and _UNESCAPED[self.escape_set][p[i + 1]]:
                    out[n] = <char>_UNESCAPED[self.escape_set][p[i + 1]]
                    n += 1
                    i += 2
                    continue
                if not self.keep_undefined:
                    return None
            out[n] = <char>c
            n += 1
            i += 1
        if not high:
            return _ascii(<const unsigned char *>out, n)
        try:
            return PyUnicode_DecodeUTF8(out, n, NULL)
        except UnicodeDecodeError:
            return None

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _parse_header(self, const unsigned char *b, Py_ssize_t ls, Py_ssize_t content_end) except -1:
        cdef Py_ssize_t colon, i, value_at
        cdef unsigned char c
        cdef int name_flags, value_flags = 0, bad
        cdef bint unescape = self.escaped and self.escape_set >= 0
        cdef unsigned long long length = 0
        cdef const unsigned char *hit = <const unsigned char *>memchr(b + ls, COLON, content_end - ls)
        if hit != NULL:
            colon = hit - b
            value_at = colon + 1
            name_flags = _byte_flags(b + ls, colon - ls)
            value_flags = _byte_flags(b + value_at, content_end - value_at)
        else:
            colon = value_at = content_end
            name_flags = _byte_flags(b + ls, content_end - ls)
        # what the line may not hold under this decoder's options
        bad = HAS_NUL
        if not self.bare_cr_ok:
            bad |= HAS_CR
        if (name_flags | value_flags) & bad:
            self._diagnose(b, ls, content_end)
        if (value_flags & HAS_COLON and not (self.colon_ok or not self.escaped)) or colon == ls or (
            hit == NULL and not self.missing_colon_ok
        ):
            self._diagnose(b, ls, content_end)
        # a ColumnDecoder copies a field's wire bytes unless they need checking (UTF-8) or unescaping
        name = value = RAW
        if not self.columnar or name_flags & HAS_HIGH or (unescape and name_flags & HAS_BACKSLASH):
            name = self._field(b + ls, colon - ls, name_flags & HAS_BACKSLASH, unescape, name_flags & HAS_HIGH)
        if not self.columnar or value_flags & HAS_HIGH or (unescape and value_flags & HAS_BACKSLASH):
            value = self._field(
                b + value_at, content_end - value_at, value_flags & HAS_BACKSLASH, unescape, value_flags & HAS_HIGH
            )
        if name is None or value is None:
            self._diagnose(b, ls, content_end)
        if self.cl < 0 and colon - ls == 14 and memcmp(b + ls, b"content-length", 14) == 0:
            if value_at == content_end:
                self._diagnose(b, ls, content_end)
            for i in range(value_at, content_end):
                c = b[i]
                if c < 48 or c > 57 or length > MAX_CONTENT_LENGTH // 10:
                    self._diagnose(b, ls, content_end)
                length = length * 10 + (c - 48)
            if length > <unsigned long long>self.max_body:
                self._diagnose(b, ls, content_end)
            self.cl = <Py_ssize_t>length
        if self.columnar:
            self._store_field_pair(b + ls, colon - ls, name, b + value_at, content_end - value_at, value)
        else:
            self._push_pair(self._pair(name, value))
        return 0

    cdef int _store_field_pair(self, const unsigned char *name_at, Py_ssize_t name_size, object name,
                               const unsigned char *value_at, Py_ssize_t value_size, object value) except -1:
        """A ColumnDecoder's header: the wire bytes, or the UTF-8 of what they decoded to when it differs."""
        cdef const char *name_data = <const char *>name_at
        cdef const char *value_data = <const char *>value_at
        if name is not RAW:
            name_data = PyUnicode_AsUTF8AndSize(name, &name_size)
        if value is not RAW:
            value_data = PyUnicode_AsUTF8AndSize(value, &value_size)
        self.store.add_header(name_data, name_size, value_data, value_size)
        self.n_pairs += 1
        return 0

    cdef tuple _pair(self, str name, str value):
        """The (name, value) tuple: the same object when this pair was seen lately."""
        cdef size_t h = ((<size_t><PyObject *>name) >> 4) * 0x9E3779B1u + ((<size_t><PyObject *>value) >> 4)
        cdef PairSlot *slot = &self.pair_cache[(h ^ (h >> 13)) & (PAIR_SLOTS - 1)]
        cdef tuple pair
        cdef PyObject *old
        if slot.name == <PyObject *>name and slot.value == <PyObject *>value:
            return <tuple>slot.pair
        pair = PyTuple_New(2)
        Py_INCREF(name)  # PyTuple_SET_ITEM steals a reference
        PyTuple_SET_ITEM(pair, 0, name)
        Py_INCREF(value)
        PyTuple_SET_ITEM(pair, 1, value)
        PyObject_GC_UnTrack(<void *>pair)  # holds two str: can never be in a cycle
        old = slot.pair
        Py_INCREF(pair)
        slot.pair = <PyObject *>pair
        slot.name = <PyObject *>name
        slot.value = <PyObject *>value
        Py_XDECREF(old)  # last: a finalizer it runs finds the slot whole
        return pair

    cdef int _push_pair(self, tuple pair) except -1:
        cdef PyObject **grown
        if self.n_pairs == self.pairs_cap:
            grown = <PyObject **>PyMem_Realloc(self.pairs, max(16, 2 * self.pairs_cap) * sizeof(PyObject *))
            if grown == NULL:
                raise MemoryError()
            self.pairs = grown
            self.pairs_cap = max(16, 2 * self.pairs_cap)
        Py_INCREF(pair)
        self.pairs[self.n_pairs] = <PyObject *>pair
        self.n_pairs += 1
        return 0

    cdef tuple _take_pairs(self):
        """The frame's headers as a tuple; the references move into it."""
        cdef tuple headers = PyTuple_New(self.n_pairs)
        cdef Py_ssize_t i
        for i in range(self.n_pairs):
            PyTuple_SET_ITEM(headers, i, <object>self.pairs[i])  # steals the owned reference
        self.n_pairs = 0
        return headers

    cdef int _begin_body(self, Py_ssize_t bs) except -1:
        """The head is complete: checks that need the whole head, then the body phase."""
        cdef Py_ssize_t fs = self.fs
        self.bs = self.bscan = bs
        self.phase = BODY
        if self.cl >= 0:
            if self.cl and self.strict and self.command not in BODY_COMMANDS:
                self._fail(BodyNotAllowedError, BODY_NOT_ALLOWED.format(self.command), bs, fs, "")
            if bs + self.cl + 1 - fs > self.max_frame:
                self._fail(
                    LimitExceededError, FRAME_TOO_LARGE.format(self.max_frame), fs + self.max_frame, fs,
                    "max_frame_size",
                )
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef bint _body(self, const unsigned char *b, Py_ssize_t end, list out) except -1:
        cdef Py_ssize_t fs = self.fs, bs = self.bs, nul, frame_at, body_at, stop
        cdef const unsigned char *hit
        cdef tuple headers
        cdef const char *command
        cdef Py_ssize_t size
        if self.cl >= 0:
            nul = bs + self.cl
            if end <= nul:
                return False
            if b[nul] != 0:
                self._fail(MissingNullError, MISSING_NULL.format(self.cl), nul, fs, "")
        else:
            if (self.bscan == bs and end > bs and b[bs] != 0 and self.strict
                    and self.command not in BODY_COMMANDS):
                self._fail(BodyNotAllowedError, BODY_NOT_ALLOWED.format(self.command), bs, fs, "")
            frame_at = fs + self.max_frame
            body_at = bs + self.max_body
            stop = min(end, body_at + 1, frame_at)
            hit = NULL
            if stop > self.bscan:
                hit = <const unsigned char *>memchr(b + self.bscan, 0, stop - self.bscan)
            if hit == NULL:
                if end > frame_at and frame_at <= body_at:
                    self._fail(
                        LimitExceededError, FRAME_TOO_LARGE.format(self.max_frame), frame_at, fs, "max_frame_size"
                    )
                if end > body_at:
                    self._fail(LimitExceededError, BODY_TOO_LARGE.format(self.max_body), body_at, fs, "max_body_size")
                self.bscan = end
                return False
            nul = hit - b
        if self.columnar:
            command = PyUnicode_AsUTF8AndSize(self.command, &size)
            self.store.commit(command, size, <const char *>b + bs, nul - bs, self.base + fs)
            self.n_pairs = 0  # the store has them
        else:
            headers = self._take_pairs()
            PyObject_GC_UnTrack(<void *>headers)  # holds only (str, str) pairs
            out.append(_make_frame(
                self.command, headers, PyBytes_FromStringAndSize(<const char *>b + bs, nul - bs), self.base + fs
            ))
        self.pos = nul + 1
        self.phase = BETWEEN
        return True


cdef class ColumnDecoder(Decoder):
    """A Decoder whose frames become rows of columns in Arrow's layout (no Frame objects).

    ``feed(data)`` decodes as :class:`Decoder` does, with the same options,
    errors and offsets, and returns how many rows wait to be taken;
    ``take()`` returns them as :class:`fastframe.Columns`. On malformed
    input, the rows completed before the bad byte stay to be taken (the
    error's ``frames`` is empty). There are no heart-beat events.
    """

    def __cinit__(self):
        self.store = _ColumnStore()
        self.columnar = True

    def __init__(self, version="1.2", **options):
        Decoder.__init__(self, version, **options)
        if self.events:
            raise ValueError(NO_HEARTBEAT_EVENTS)

    def reset(self):
        """Forget everything: buffered bytes, rows not taken, counters, a pending error."""
        Decoder.reset(self)  # the store too (Decoder._reset)

    def feed(self, data):
        """Add bytes; return the number of rows waiting to be taken."""
        self._feed(data, [])
        return self.store.pending()

    def buffer_updated(self, nbytes):
        """``nbytes`` bytes were written into the buffer from :meth:`get_buffer`: the number of rows waiting."""
        self._received(nbytes, [])
        return self.store.pending()

    @property
    def rows(self):
        """Rows (complete frames) waiting to be taken."""
        return self.store.pending()

    @property
    def pending_bytes(self):
        """Data bytes (commands, header names and values, bodies) of the rows waiting to be taken."""
        return self.store.pending_bytes()

    def take(self, max_rows=None, max_bytes=None):
        """The oldest rows waiting, as Columns: all of them, or at most ``max_rows``
        rows and ``max_bytes`` data bytes (one row at least, when any waits).

        Raises OverflowError when one frame alone overflows an Arrow column (2 GiB).
        """
        rows, size = take_limits(max_rows, max_bytes)
        self._enter("take")
        try:
            return self.store.take(rows, size)
        finally:
            self.busy = False


def decode(data, version="1.2", **options):
    """Decode a whole buffer: every frame in it; raises if it ends inside a frame."""
    decoder = Decoder(version, **options)
    frames = decoder.feed(data)
    decoder.close()
    return frames


# ---------------------------------------------------------------- encoder

cdef class Encoder:
    """Frame serializer with fixed options (see :func:`encode`)."""

    cdef readonly object options
    cdef readonly str version
    cdef int escape_set  # the escape tables' index, -1 for STOMP 1.0 (none)
    cdef int content_length  # -1: when the body is non-empty, 1: always, 0: only for NUL
    cdef bytes eol
    cdef str escapes  # the escape set's name, for encode_error
    # escaping verdicts of recently seen str objects (owned, so their addresses stay theirs)
    cdef PyObject *seen[ENCODER_SLOTS]
    cdef Py_ssize_t seen_extra[ENCODER_SLOTS]

    def __cinit__(self):
        cdef int i
        for i in range(ENCODER_SLOTS):
            self.seen[i] = NULL

    def __dealloc__(self):
        cdef int i
        for i in range(ENCODER_SLOTS):
            Py_XDECREF(self.seen[i])

    cdef inline Py_ssize_t _extra(self, str text, const char *data, Py_ssize_t size, bint escape, bint is_name):
        """_escape_extra, remembered per str object when escaping (names and values repeat)."""
        cdef size_t slot
        cdef Py_ssize_t extra
        cdef PyObject *old
        if not escape:
            return _escape_extra(data, size, NULL, is_name)
        slot = ((<size_t><PyObject *>text) >> 4) * 0x9E3779B1u
        slot = (slot ^ (slot >> 16)) & (ENCODER_SLOTS - 1)
        if self.seen[slot] == <PyObject *>text:
            return self.seen_extra[slot]
        extra = _escape_extra(data, size, _ESCAPE_LETTER[self.escape_set], is_name)
        old = self.seen[slot]
        Py_INCREF(text)
        self.seen[slot] = <PyObject *>text
        self.seen_extra[slot] = extra
        # last: a str subclass's finalizer may encode with this encoder, and finds the cache whole
        Py_XDECREF(old)
        return extra

    def __init__(self, version="1.2", **options):
        opts = encoder_options(version, **options)
        self.options = opts
        self.version = opts.version
        self.escapes = opts.escapes
        self.escape_set = _escape_set(opts.escapes)
        self.content_length = -1 if opts.content_length is None else int(opts.content_length)
        self.eol = opts.eol.encode()

    def encode(self, frame, headers=None, body=None):
        """Encode a Frame, or a command with headers and body, to bytes."""
        return self._encode_any(frame, headers, body)

    cdef bytes _encode_any(self, frame, headers, body):
        if type(frame) is str:  # first: looking up a missing __fastframe_frame__ costs more than encoding
            command = frame
            if headers is None:
                headers = ()
            if type(body) is not bytes:
                headers = _normalized(headers)  # its TypeError comes first, as in the Python twin
                body = body_bytes(b"" if body is None else body)
        elif type(frame) is Frame:
            if headers is not None or body is not None:
                raise TypeError("pass either a Frame or (command, headers, body), not both")
            command, headers, body = (<Frame>frame)._command, (<Frame>frame)._headers, (<Frame>frame)._body
        elif getattr(frame, "__fastframe_frame__", False):
            if headers is not None or body is not None:
                raise TypeError("pass either a Frame or (command, headers, body), not both")
            command, headers, body = frame.command, tuple(frame.headers), frame.body
        else:
            if not isinstance(frame, str):
                raise TypeError(f"command must be str or a Frame, not {type(frame).__name__}")
            command = frame
            if headers is None:
                headers = ()
            if type(body) is not bytes:
                headers = _normalized(headers)  # its TypeError comes first, as in the Python twin
                body = body_bytes(b"" if body is None else body)
        result = self._encode(command, headers, body)
        if result is None:
            headers = _normalized(headers)
            error = encode_error(command, headers, body, self.escapes)
            raise error if error is not None else RuntimeError("fastframe: encoder and encode_error disagree")
        return result

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _gather(self, object headers, Field *fields, Py_ssize_t n) except -1:
        """Borrow each name and value into ``fields``; 0 when ``headers`` is not a dict, list or tuple of
        exact-str pairs (the caller normalizes them first). Nothing of the caller's runs until they are
        used, so borrowing is safe."""
        cdef Py_ssize_t pos = 0, i = 0
        cdef PyObject *key
        cdef PyObject *value
        if type(headers) is dict:
            while PyDict_Next(headers, &pos, &key, &value):
                if type(<object>key) is not str or type(<object>value) is not str:
                    return 0
                fields[2 * i].text = key
                fields[2 * i + 1].text = value
                i += 1
            return 1
        for i in range(n):
            item = (<tuple>headers)[i] if type(headers) is tuple else (<list>headers)[i]
            if not _exact_pair(item):
                return 0
            fields[2 * i].text = <PyObject *>(<tuple>item)[0]
            fields[2 * i + 1].text = <PyObject *>(<tuple>item)[1]
        return 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef object _encode(self, str command, object headers, bytes body):
        """The frame's bytes, or None when it cannot be encoded (the caller finds out why).

        ``headers``: a dict, list or tuple, normalized here when not of exact-str pairs.
        """
        cdef Py_ssize_t command_size, body_size = len(body), total, i, n
        cdef Py_ssize_t eol_size = len(self.eol), length_size = 0
        cdef const char *command_data
        cdef const char *body_data = PyBytes_AS_STRING(body)
        cdef const char *eol_data = PyBytes_AS_STRING(self.eol)
        cdef bint escape, has_length = False
        cdef char *w
        cdef char digits[24]
        cdef Field stack_fields[64]
        cdef Field *fields = stack_fields
        cdef Field *name
        cdef Field *value
        cdef const unsigned char *letters
        cdef size_t rest
        if type(headers) is not dict and type(headers) is not tuple and type(headers) is not list:
            headers = _normalized(headers)
        n = len(headers)
        try:
            command_data = PyUnicode_AsUTF8AndSize(command, &command_size)
        except UnicodeEncodeError:
            return None
        if command_size == 0 or _find_any(command_data, command_size, b"\n\r\0", 3):
            return None
        escape = self.escape_set >= 0 and not _unescaped_command(command_data, command_size)
        letters = _ESCAPE_LETTER[self.escape_set] if escape else NULL
        total = command_size + eol_size
        if 2 * n > 64:
            fields = <Field *>PyMem_Malloc(2 * n * sizeof(Field))
            if fields == NULL:
                raise MemoryError()
        try:
            if not self._gather(headers, fields, n):
                headers = _normalized(headers)  # a pair of str subclasses, a list for a pair, or a TypeError
                self._gather(headers, fields, n)
            # pass 1: validate, and size every name and value once
            for i in range(n):
                name = &fields[2 * i]
                value = &fields[2 * i + 1]
                try:
                    name.data = PyUnicode_AsUTF8AndSize(<str>name.text, &name.size)
                    value.data = PyUnicode_AsUTF8AndSize(<str>value.text, &value.size)
                except UnicodeEncodeError:
                    return None
                if name.size == 0:
                    return None
                name.extra = self._extra(<str>name.text, name.data, name.size, escape, True)
                value.extra = self._extra(<str>value.text, value.data, value.size, escape, False)
                if name.extra < 0 or value.extra < 0:
                    return None
                total += name.size + name.extra + 1 + value.size + value.extra + eol_size
                if not has_length and name.size == 14 and memcmp(name.data, b"content-length", 14) == 0:
                    has_length = True
                    if not _is_decimal(value.data, value.size, body_size):
                        return None
            if not has_length and (
                (self.content_length == -1 and body_size) or self.content_length == 1
                or memchr(body_data, 0, body_size) != NULL
            ):
                # the body size in decimal, written backwards into digits
                rest = <size_t>body_size
                while True:
                    length_size += 1
                    digits[24 - length_size] = <char>(48 + rest % 10)
                    rest //= 10
                    if rest == 0:
                        break
                total += 15 + length_size + eol_size
            total += eol_size + body_size + 1
            # pass 2: write once into the result
            result = PyBytes_FromStringAndSize(NULL, total)
            w = PyBytes_AS_STRING(result)
            memcpy(w, command_data, command_size)
            w += command_size
            memcpy(w, eol_data, eol_size)
            w += eol_size
            for i in range(2 * n):
                w = _write_escaped(w, &fields[i], letters)
                if i & 1:
                    memcpy(w, eol_data, eol_size)
                    w += eol_size
                else:
                    w[0] = b':'
                    w += 1
            if length_size:
                memcpy(w, b"content-length:", 15)
                memcpy(w + 15, digits + 24 - length_size, length_size)
                w += 15 + length_size
                memcpy(w, eol_data, eol_size)
                w += eol_size
            memcpy(w, eol_data, eol_size)
            w += eol_size
            memcpy(w, body_data, body_size)
            w += body_size
            w[0] = 0
            return result
        finally:
            if fields != stack_fields:
                PyMem_Free(fields)


cdef inline bint _unescaped_command(const char *data, Py_ssize_t size) noexcept:
    """True for CONNECT, STOMP and CONNECTED (UNESCAPED_COMMANDS), whose headers are sent as they are."""
    if size == 7:
        return memcmp(data, b"CONNECT", 7) == 0
    if size == 5:
        return memcmp(data, b"STOMP", 5) == 0
    return size == 9 and memcmp(data, b"CONNECTED", 9) == 0


cdef inline bint _find_any(const char *data, Py_ssize_t size, const char *chars, int count) noexcept:
    cdef int k
    for k in range(count):
        if memchr(data, chars[k], size) != NULL:
            return True
    return False


cdef struct Field:
    PyObject *text  # the name or value (borrowed)
    const char *data  # UTF-8, owned by the str
    Py_ssize_t size
    Py_ssize_t extra  # bytes escaping adds


cdef inline bint _plain_text(const char *data, Py_ssize_t size) noexcept:
    """True when a name or value has no NUL, LF, CR, ':' or backslash (8 bytes at a time)."""
    cdef unsigned long long word
    cdef Py_ssize_t i = 0
    cdef unsigned char c
    if size < 8:
        for i in range(size):
            c = <unsigned char>data[i]
            if c == 0 or c == LF or c == CR or c == COLON or c == BACKSLASH:
                return False
        return True
    while True:
        memcpy(&word, data + i, 8)
        if (_has_byte(word, 0) | _has_byte(word, LF) | _has_byte(word, CR) | _has_byte(word, COLON)
                | _has_byte(word, BACKSLASH)):
            return False
        if i + 8 >= size:
            return True
        i = min(i + 8, size - 8)  # the last word may overlap the one before


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _escape_extra(const char *data, Py_ssize_t size, const unsigned char *letters, bint is_name) noexcept:
    """Bytes escaping adds to a name or value; -1 when it cannot be represented.

    ``letters`` is the escape table, or NULL for headers sent as they are
    (CONNECT-like frames, STOMP 1.0), where ':' may not be in a name.
    """
    cdef Py_ssize_t i, extra = 0
    cdef unsigned char c
    if _plain_text(data, size):
        return 0
    for i in range(size):
        c = <unsigned char>data[i]
        if c == 0:
            return -1
        if letters != NULL and letters[c]:
            extra += 1
        elif c == LF or c == CR or (c == COLON and is_name and letters == NULL):
            return -1  # no escape for it in this set
    return extra


@cython.boundscheck(False)
@cython.wraparound(False)
cdef char *_write_escaped(char *w, const Field *field, const unsigned char *letters) noexcept:
    cdef Py_ssize_t i
    cdef unsigned char c
    if field.extra == 0:
        memcpy(w, field.data, field.size)
        return w + field.size
    for i in range(field.size):
        c = <unsigned char>field.data[i]
        if letters[c]:
            w[0] = b'\\'
            w[1] = <char>letters[c]
            w += 2
        else:
            w[0] = <char>c
            w += 1
    return w


cdef inline bint _is_decimal(const char *data, Py_ssize_t size, Py_ssize_t expected) noexcept:
    """True when ``data`` is ASCII digits whose value is ``expected``."""
    cdef Py_ssize_t i
    cdef unsigned long long value = 0
    if size == 0:
        return False
    for i in range(size):
        if data[i] < 48 or data[i] > 57:  # not '0'-'9'
            return False
        if value > <unsigned long long>expected:
            return False  # already too big; stops an overflow too
        value = value * 10 + <unsigned long long>(data[i] - 48)
    return value == <unsigned long long>expected


_ENCODERS = {}


def encode(frame, headers=None, body=None, *, version="1.2", escapes=None, content_length=None, eol="\n"):
    """Encode a Frame, or ``(command, headers, body)``, to the bytes of one frame.

    ``escapes`` picks the escape set (default: the version's; "1.2" always
    escapes, as RabbitMQ expects on any version). ``content_length``: None adds
    it when the body is non-empty, True always, False only when the body
    contains NUL. ``eol`` is "\\n" or "\\r\\n". A content-length header given by
    the caller is kept, and must match the body.
    """
    if escapes is None and content_length is None and version == "1.2" and eol == "\n":
        return _DEFAULT_ENCODER._encode_any(frame, headers, body)
    key = (version, type(version), escapes, type(escapes), content_length, type(content_length), eol, type(eol))
    encoder = _ENCODERS.get(key)
    if encoder is None:
        encoder = Encoder(version, escapes=escapes, content_length=content_length, eol=eol)
        if len(_ENCODERS) < 64:
            _ENCODERS[key] = encoder
    return (<Encoder>encoder)._encode_any(frame, headers, body)


cdef Encoder _DEFAULT_ENCODER = Encoder()


# ---------------------------------------------------------------- to_columns


def to_columns(frames):
    """Frames as rows of columns in Arrow's memory layout, for data-frame libraries.

    Returns a :class:`fastframe.Columns`: one row per frame, in order (the
    ``frame_offsets`` of a frame made by hand are -1). Raises OverflowError
    when the frames hold more than 2 GiB of data (give fewer frames).
    """
    cdef _ColumnStore store = _ColumnStore()
    cdef Py_ssize_t size, count = 0
    cdef const char *data
    cdef const char *more
    cdef Py_ssize_t more_size
    cdef Frame frame
    for item in frames:
        if type(item) is Frame:
            frame = <Frame>item
            command, headers, body, offset = frame._command, frame._headers, frame._body, frame._offset
        else:
            command, headers, body = item.command, tuple(item.headers), bytes(item.body)
            offset = getattr(item, "offset", None)
            offset = -1 if offset is None else offset
        for pair in headers:
            data = PyUnicode_AsUTF8AndSize((<tuple>pair)[0], &size)
            more = PyUnicode_AsUTF8AndSize((<tuple>pair)[1], &more_size)
            store.add_header(data, size, more, more_size)
        data = PyUnicode_AsUTF8AndSize(command, &size)
        store.commit(data, size, PyBytes_AS_STRING(body), len(body), offset)
        count += 1
    columns = store.take(count, MAX_COLUMN)
    if columns.rows != count:
        raise OverflowError(TOO_LARGE_FOR_COLUMNS)
    return columns
