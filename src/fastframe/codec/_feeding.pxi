# Feeding the decoder, as module functions taking it: the caller's bytes parsed in place when
# nothing is buffered, else appended only as far as needed; the unconsumed tail kept in the
# decoder's buffer (reserve, append, shift, renumber, compact); a large body arriving in pieces
# copied once, straight into the bytes object its frame will hold (the sink).
# Included by _codec_c.pyx after _decoder.pxi.

cdef int _feed_buffer(Decoder self, data, list out) except -1:
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
            taken = _fill_sink(self, p, size, out)
            p += taken
            size -= taken
            if size == 0:
                return 0
        if self.pos == self.end:
            # nothing buffered: parse the caller's bytes in place, keep only the tail
            self.base += self.end
            self.pos = self.end = 0
            _run_in_place(self, p, size, out)
        else:
            _finish_buffered(self, p, size, out)
        _start_sink(self)
    except FrameError as error:
        error.frames = out
        self.error = error
        raise
    finally:
        PyBuffer_Release(&view)
    return 0


cdef void _drop_sink(Decoder self) noexcept:
    cdef PyObject *sink = self.sink
    self.sink = NULL
    self.sunk = self.sink_cap = 0
    Py_XDECREF(sink)


cdef int _size_sink(Decoder self, Py_ssize_t size) except -1:
    cdef object fresh
    if self.sink == NULL:
        fresh = PyBytes_FromStringAndSize(NULL, size)
        Py_INCREF(fresh)
        self.sink = <PyObject *>fresh
    else:
        _PyBytes_Resize(&self.sink, size)  # a realloc: large blocks grow without a copy (mremap)
    self.sink_cap = size
    return 0


cdef inline bint _sink_wanted(Decoder self, Py_ssize_t have) noexcept:
    """A large body is incomplete, ``have`` of its bytes are here, no sink yet: the body goes to a sink."""
    if self.phase != BODY or self.content_length < SINK_MIN or self.sink != NULL:
        return False
    return RADIUS <= have <= self.content_length  # an excerpt must never need bytes before body_start


cdef inline Py_ssize_t _sink_size(Decoder self, Py_ssize_t have) noexcept:
    """The sink's capacity once ``have`` body bytes arrived: memory follows the bytes received.

    The body's final size when it is at most SINK_RESERVE and SINK_AHEAD times what arrived (then it
    is allocated once, and never grows by a copy); else twice what arrived, at least SINK_MIN. So an
    announced content-length alone reserves at most SINK_MIN (SECURITY.md).
    """
    if self.content_length <= SINK_RESERVE and self.content_length <= SINK_AHEAD * have:
        return self.content_length
    return min(self.content_length, max(2 * have, SINK_MIN))


cdef int _open_sink(Decoder self, const unsigned char *body, Py_ssize_t have) except -1:
    """Move the body's first ``have`` bytes into a new sink; the head stays in buf (``end`` is ``body_start``)."""
    _size_sink(self, _sink_size(self, have))
    memcpy(PyBytes_AS_STRING(<object>self.sink), body, have)
    self.sunk = have
    self.end = self.body_start
    return 0


cdef int _start_sink(Decoder self) except -1:
    """After a feed: a large body still incomplete moves out of buf, into the frame's own bytes."""
    cdef Py_ssize_t have = self.end - self.body_start
    if _sink_wanted(self, have):
        _open_sink(self, self.buf + self.body_start, have)
    return 0


cdef Py_ssize_t _fill_sink(Decoder self, const unsigned char *data, Py_ssize_t size, list out) except -1:
    """Copy body bytes straight into the sink; at the NUL, the frame. Returns the bytes consumed."""
    cdef Py_ssize_t n = min(self.content_length - self.sunk, size), nul_at, hi
    cdef char *into
    cdef const char *command
    cdef Py_ssize_t command_size
    cdef tuple headers
    if self.sunk + n > self.sink_cap:
        _size_sink(self, max(self.sunk + n, _sink_size(self, self.sunk + n)))
    into = PyBytes_AS_STRING(<object>self.sink)
    memcpy(into + self.sunk, data, n)
    self.sunk += n
    if n == size:
        return n
    nul_at = self.base + self.body_start + self.content_length  # the stream offset of the byte after the body
    if data[n] != 0:
        hi = min(n + RADIUS, size)
        window = PyBytes_FromStringAndSize(into + self.content_length - RADIUS, RADIUS)
        window += PyBytes_FromStringAndSize(<const char *>data + n, hi - n)
        _append(self, data + n, size - n)  # fed is fed: counted as buffered, as in the Python twin
        raise make_decode_error(
            MissingNullError, MISSING_NULL.format(self.content_length), nul_at, window, nul_at - RADIUS,
            self.base + self.frame_start, nul_at + hi - n, "",
        )
    if self.columnar:
        command = PyUnicode_AsUTF8AndSize(self.command, &command_size)
        self.store.commit(command, command_size, into, self.content_length, self.base + self.frame_start)
        self.n_pairs = 0  # the store has them
        _drop_sink(self)
    else:
        headers = _take_pairs(self)
        PyObject_GC_UnTrack(<void *>headers)  # holds only (str, str) pairs
        body = <object>self.sink  # the frame's reference; the sink's own goes below
        self.sink = NULL
        self.sunk = self.sink_cap = 0
        Py_DECREF(body)
        out.append(_make_frame(self.command, headers, <bytes>body, self.base + self.frame_start))
    # the frame is consumed: what follows its NUL starts a new buffer
    self.base = nul_at + 1
    self.pos = self.end = 0
    self.phase = BETWEEN
    self._start_frame(0)
    return n + 1


cdef int _run_in_place(Decoder self, const unsigned char *data, Py_ssize_t size, list out) except -1:
    """Parse the caller's bytes where they are (``pos`` indexes them); keep only the unconsumed tail."""
    cdef bint done = False
    self.end = 0
    self.cur = data
    try:
        self._run(size, out)
        done = True
    finally:
        _keep_tail(self, data, size, done)
    return 0


cdef int _finish_buffered(Decoder self, const unsigned char *data, Py_ssize_t size, list out) except -1:
    """Bytes are buffered: append only as much of ``data`` as consumes them, then parse the rest in place.

    Pieces double from 4 KiB (or the buffered size), so a frame that ends
    early in ``data`` does not make all of it be copied, and no byte is
    scanned twice (the parser resumes where it stopped).
    """
    cdef Py_ssize_t taken = 0, at, piece = max(4096, self.end - self.pos)
    try:
        while True:
            piece = min(piece, size - taken)
            _append(self, data + taken, piece)
            taken += piece
            self.cur = self.buf
            self.rest = data + taken
            self.rest_size = size - taken
            self._run(self.end, out)
            at = self.end - taken  # where data[0] is in buf (an _append may have moved it)
            if taken == size:
                _compact(self)
                return 0
            if self.pos >= at:
                break
            piece *= 2
    except FrameError:
        _append(self, data + taken, size - taken)  # fed is fed: counted as buffered, as when it all was
        _compact(self)
        raise
    finally:
        self.rest_size = 0
    # what is unconsumed starts inside data: renumber from data[0] and go on in place
    _renumber(self, at)
    _run_in_place(self, data, size, out)
    return 0


cdef int _reserve(Decoder self, Py_ssize_t size) except -1:
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


cdef int _append(Decoder self, const unsigned char *data, Py_ssize_t size) except -1:
    if self.end + size > self.cap and self.pos > 0:
        _shift(self, self.pos)  # make room by dropping consumed bytes first
    _reserve(self, self.end + size)
    memcpy(self.buf + self.end, data, size)
    self.end += size
    return 0


cdef void _shift(Decoder self, Py_ssize_t shift) noexcept:
    """Drop the first ``shift`` (consumed) bytes and renumber the indexes."""
    memmove(self.buf, self.buf + shift, self.end - shift)
    _renumber(self, shift)
    self.end -= shift


cdef inline void _renumber(Decoder self, Py_ssize_t shift) noexcept:
    self.base += shift
    self.pos -= shift
    if self.phase != BETWEEN:
        self.frame_start -= shift
        self.line_start -= shift
        self.line_scan -= shift
        if self.body_start >= 0:
            self.body_start -= shift
            self.body_scan -= shift


cdef int _keep_tail(Decoder self, const unsigned char *data, Py_ssize_t size, bint parsed) except -1:
    """After parsing the caller's bytes in place: copy what is unconsumed.

    When they were ``parsed`` without error and end inside a large body, the
    body's bytes go straight into the sink (one copy), only the head into buf.
    """
    cdef Py_ssize_t shift = self.pos, keep
    _renumber(self, shift)
    self.end = keep = size - shift
    if parsed and _sink_wanted(self, keep - self.body_start):
        keep = self.body_start
    if keep:
        _reserve(self, keep)
        memcpy(self.buf, data + shift, keep)
    elif self.cap > 65536:
        PyMem_Free(self.buf)  # a large frame is gone: give its memory back
        self.buf = NULL
        self.cap = 0
    if keep < self.end:
        _open_sink(self, data + shift + keep, self.end - keep)
    return 0


cdef void _compact(Decoder self) noexcept:
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
        _shift(self, self.pos)
