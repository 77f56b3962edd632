# Decoder, ColumnDecoder and decode(): buffering, the field caches, heads and bodies.
# Included by _codec_c.pyx (one module: the parts share its cimports and C names).

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
        # Check and set under the object's lock: on a free-threaded build two threads could
        # otherwise both see the flag clear. With the GIL the critical section compiles to nothing.
        with cython.critical_section(self):
            if self.busy:
                raise RuntimeError(REENTRANT_CALL.format(type(self).__name__, method))
            self.busy = True
        return 0

    cdef inline void _leave(self) noexcept:
        # Cleared under the same lock, so the next caller sees every write this call made.
        with cython.critical_section(self):
            self.busy = False

    def __init__(self, version="1.2", **options):
        self._enter("__init__")
        try:
            self._configure(version, options)
            self._reset()
        finally:
            self._leave()

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
            self._leave()

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
            self._leave()

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
            self._leave()
        return 0

    cdef int _feed(self, data, list out) except -1:
        self._enter("feed")
        try:
            self._feed_buffer(data, out)
        finally:
            self._leave()
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
            self._leave()

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
                if not self._head_lines(b, end):
                    return 0
            if not self._read_body(b, end, out):
                return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef bint _head_lines(self, const unsigned char *b, Py_ssize_t end) except -1:
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
    cdef bint _read_body(self, const unsigned char *b, Py_ssize_t end, list out) except -1:
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
            self._leave()


def decode(data, version="1.2", **options):
    """Decode a whole buffer: every frame in it; raises if it ends inside a frame."""
    decoder = Decoder(version, **options)
    frames = decoder.feed(data)
    decoder.close()
    return frames
