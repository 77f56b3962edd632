# The column store (Arrow-layout rows) and to_columns().
# Included by _codec_c.pyx (one module: the parts share its cimports and C names).

# ---------------------------------------------------------------- columns
# Rows of frames, kept column by column in growable C buffers, and cut into
# Arrow-layout batches (fastframe.codec._layout.Columns) by take(). A ColumnDecoder
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
    if ni == 0:
        return 0  # two empty names; the names column may have no memory yet (memcmp of NULL is undefined)
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
                    # (prints[j] >> 16) is the length: two empty names are equal without a memcmp of NULL
                    if prints[i] == prints[j] and (prints[j] >> 16 == 0 or memcmp(
                        self.names.data + starts[i], self.names.data + starts[j], prints[j] >> 16
                    ) == 0):
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
