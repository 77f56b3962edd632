# The Decoder: its state, its public methods, and the decoding steps (named as in the Python
# twin: _run, _head_lines, _parse_command, _parse_header, _begin_body, _read_body); decode().
# Included by _codec_c.pyx (one module: the parts share its cimports and C names). What the steps
# call lives beside it as module functions taking the decoder (a cdef class body cannot include
# a file): _fields.pxi (field and pair caches), _feeding.pxi (buffer and body sink), _faults.pxi
# (errors and their excerpts).

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

    The codec guide (docs/guides/codec.md) lists every option and its default.
    """

    cdef readonly object options
    cdef readonly str version
    cdef readonly Py_ssize_t heartbeats
    # options, unpacked
    cdef bint strict, colon_ok, bare_cr_ok, missing_colon_ok, keep_undefined, events
    cdef const char *utf8_errors  # NULL (strict: an error), or "surrogateescape" (keep_invalid_utf8)
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
    cdef Py_ssize_t frame_start, line_start, line_scan, body_start, body_scan, content_length
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
    # copy per body byte. Its capacity follows what arrived, never a content-length alone
    # (see _sink_size).
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
            _remember(self, <const unsigned char *>PyUnicode_AsUTF8AndSize(name, &size), size, name)

    def __dealloc__(self):
        cdef int i
        _drop_pairs(self)
        PyMem_Free(self.pairs)
        for i in range(CACHE_SLOTS):
            Py_XDECREF(self.cache[i].text)
        for i in range(PAIR_SLOTS):
            Py_XDECREF(self.pair_cache[i].pair)
        PyMem_Free(self.buf)
        PyMem_Free(self.scratch)
        Py_XDECREF(self.sink)

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
        self.utf8_errors = NULL
        if opts.keep_invalid_utf8:
            self.utf8_errors = "surrogateescape"  # a C string literal: static, never freed
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
        _drop_sink(self)
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
        self.frame_start = self.line_start = self.line_scan = index
        self.command = None
        self.escaped = True
        _drop_pairs(self)
        self.content_length = self.body_start = self.body_scan = -1

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
            _feed_buffer(self, memoryview(self.recv)[:size], out)
        finally:
            self._leave()
        return 0

    cdef int _feed(self, data, list out) except -1:
        self._enter("feed")
        try:
            _feed_buffer(self, data, out)
        finally:
            self._leave()
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
                        end - RADIUS, self.base + self.frame_start, end, "",
                    )
                _fail(self, TruncatedError, TRUNCATED.format(what, self.base + self.pos), self.end, self.pos, "")
            except FrameError as error:
                self.error = error
                raise
        return 0

    def _repeat_error(self):
        constructor, args = self.error.__reduce__()[:2]
        again = constructor(*args)
        again.frames = []
        return again

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
        cdef Py_ssize_t line_start, lf, content_end, avail
        cdef Py_ssize_t frame_limit = self.frame_start + self.max_frame
        cdef const unsigned char *hit
        while True:
            line_start = self.line_start
            hit = <const unsigned char *>memchr(b + self.line_scan, LF, end - self.line_scan)
            if hit == NULL:
                self.line_scan = end
                # a CR at the very end may be half of an EOL: judge the line without it
                avail = end - 1 if end > line_start and b[end - 1] == CR else end
                _check_line_limits(self, line_start, avail, avail > frame_limit)
                return False
            lf = hit - b
            content_end = lf - 1 if lf > line_start and b[lf - 1] == CR else lf
            if (content_end - line_start > self.max_line or lf >= frame_limit
                    or (self.n_pairs >= self.max_count and content_end > line_start and self.command is not None)):
                _check_line_limits(self, line_start, content_end, lf >= frame_limit)
            if self.command is None:
                self._parse_command(b, line_start, content_end)
            elif content_end == line_start:
                self.line_start = self.line_scan = lf + 1
                self._begin_body(lf + 1)
                return True
            else:
                self._parse_header(b, line_start, content_end)
            self.line_start = self.line_scan = lf + 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _parse_command(self, const unsigned char *b, Py_ssize_t line_start, Py_ssize_t content_end) except -1:
        cdef Py_ssize_t size = content_end - line_start
        cdef Py_ssize_t i
        cdef object command = _lookup(_commands, _n_commands, <const char *>b + line_start, size)
        if command is None:
            for i in range(line_start, content_end):
                if b[i] == 0 or b[i] == CR:
                    break
            else:
                try:
                    command = PyUnicode_DecodeUTF8(<char *>b + line_start, size, NULL)
                except UnicodeDecodeError:
                    command = None
            if command is None or (self.strict and command not in self.commands):
                _command_error(self, line_start, content_end)
        elif self.strict and command not in self.commands:  # NACK or STOMP in 1.0
            _command_error(self, line_start, content_end)
        self.command = command
        self.escaped = command not in UNESCAPED_COMMANDS
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _parse_header(self, const unsigned char *b, Py_ssize_t line_start, Py_ssize_t content_end) except -1:
        cdef Py_ssize_t colon, i, value_at
        cdef unsigned char c
        cdef int name_flags, value_flags = 0, bad
        cdef bint unescape = self.escaped and self.escape_set >= 0
        cdef unsigned long long length = 0
        cdef const unsigned char *hit = <const unsigned char *>memchr(b + line_start, COLON, content_end - line_start)
        if hit != NULL:
            colon = hit - b
            value_at = colon + 1
            name_flags = _byte_flags(b + line_start, colon - line_start)
            value_flags = _byte_flags(b + value_at, content_end - value_at)
        else:
            colon = value_at = content_end
            name_flags = _byte_flags(b + line_start, content_end - line_start)
        # what the line may not hold under this decoder's options
        bad = HAS_NUL
        if not self.bare_cr_ok:
            bad |= HAS_CR
        if (name_flags | value_flags) & bad:
            _diagnose(self, b, line_start, content_end)
        if (value_flags & HAS_COLON and not (self.colon_ok or not self.escaped)) or colon == line_start or (
            hit == NULL and not self.missing_colon_ok
        ):
            _diagnose(self, b, line_start, content_end)
        # a ColumnDecoder copies a field's wire bytes unless they need checking (UTF-8) or unescaping
        name = value = RAW
        if not self.columnar or name_flags & HAS_HIGH or (unescape and name_flags & HAS_BACKSLASH):
            name = _field(self, b + line_start, colon - line_start, name_flags & HAS_BACKSLASH, unescape, name_flags & HAS_HIGH)
        if not self.columnar or value_flags & HAS_HIGH or (unescape and value_flags & HAS_BACKSLASH):
            value = _field(self, 
                b + value_at, content_end - value_at, value_flags & HAS_BACKSLASH, unescape, value_flags & HAS_HIGH
            )
        if name is None or value is None:
            _diagnose(self, b, line_start, content_end)
        if self.content_length < 0 and colon - line_start == 14 and memcmp(b + line_start, b"content-length", 14) == 0:
            if value_at == content_end:
                _diagnose(self, b, line_start, content_end)
            for i in range(value_at, content_end):
                c = b[i]
                if c < 48 or c > 57 or length > MAX_CONTENT_LENGTH // 10:
                    _diagnose(self, b, line_start, content_end)
                length = length * 10 + (c - 48)
            if length > <unsigned long long>self.max_body:
                _diagnose(self, b, line_start, content_end)
            self.content_length = <Py_ssize_t>length
        if self.columnar:
            _store_field_pair(self, b + line_start, colon - line_start, name, b + value_at, content_end - value_at, value)
        else:
            _push_pair(self, _pair(self, name, value))
        return 0

    cdef int _begin_body(self, Py_ssize_t body_start) except -1:
        """The head is complete: checks that need the whole head, then the body phase."""
        cdef Py_ssize_t frame_start = self.frame_start
        self.body_start = self.body_scan = body_start
        self.phase = BODY
        if self.content_length >= 0:
            if self.content_length and self.strict and self.command not in BODY_COMMANDS:
                _fail(self, BodyNotAllowedError, BODY_NOT_ALLOWED.format(self.command), body_start, frame_start, "")
            if body_start + self.content_length + 1 - frame_start > self.max_frame:
                _fail(self, 
                    LimitExceededError, FRAME_TOO_LARGE.format(self.max_frame), frame_start + self.max_frame, frame_start,
                    "max_frame_size",
                )
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef bint _read_body(self, const unsigned char *b, Py_ssize_t end, list out) except -1:
        cdef Py_ssize_t frame_start = self.frame_start, body_start = self.body_start, nul, frame_at, body_at, stop
        cdef const unsigned char *hit
        cdef tuple headers
        cdef const char *command
        cdef Py_ssize_t size
        if self.content_length >= 0:
            nul = body_start + self.content_length
            if end <= nul:
                return False
            if b[nul] != 0:
                _fail(self, MissingNullError, MISSING_NULL.format(self.content_length), nul, frame_start, "")
        else:
            if (self.body_scan == body_start and end > body_start and b[body_start] != 0 and self.strict
                    and self.command not in BODY_COMMANDS):
                _fail(self, BodyNotAllowedError, BODY_NOT_ALLOWED.format(self.command), body_start, frame_start, "")
            frame_at = frame_start + self.max_frame
            body_at = body_start + self.max_body
            stop = min(end, body_at + 1, frame_at)
            hit = NULL
            if stop > self.body_scan:
                hit = <const unsigned char *>memchr(b + self.body_scan, 0, stop - self.body_scan)
            if hit == NULL:
                if end > frame_at and frame_at <= body_at:
                    _fail(self, 
                        LimitExceededError, FRAME_TOO_LARGE.format(self.max_frame), frame_at, frame_start, "max_frame_size"
                    )
                if end > body_at:
                    _fail(self, LimitExceededError, BODY_TOO_LARGE.format(self.max_body), body_at, frame_start, "max_body_size")
                self.body_scan = end
                return False
            nul = hit - b
        if self.columnar:
            command = PyUnicode_AsUTF8AndSize(self.command, &size)
            self.store.commit(command, size, <const char *>b + body_start, nul - body_start, self.base + frame_start)
            self.n_pairs = 0  # the store has them
        else:
            headers = _take_pairs(self)
            PyObject_GC_UnTrack(<void *>headers)  # holds only (str, str) pairs
            out.append(_make_frame(
                self.command, headers, PyBytes_FromStringAndSize(<const char *>b + body_start, nul - body_start), self.base + frame_start
            ))
        self.pos = nul + 1
        self.phase = BETWEEN
        return True


def decode(data, version="1.2", **options):
    """Decode a whole buffer: every frame in it; raises if it ends inside a frame."""
    decoder = Decoder(version, **options)
    frames = decoder.feed(data)
    decoder.close()
    return frames
