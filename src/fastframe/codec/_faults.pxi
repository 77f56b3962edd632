# The decoder's errors, as module functions taking it: the excerpt copied from the bytes being
# parsed (going on into the caller's bytes not appended yet), and the reference diagnosis of a
# command or header line from _diagnose, so both twins raise the same errors; the head's limits.
# Included by _codec_c.pyx after _decoder.pxi.

cdef bytes _window(Decoder self, Py_ssize_t lo, Py_ssize_t hi):
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


cdef int _fail(Decoder self, cls, str reason, Py_ssize_t index, Py_ssize_t floor, str limit) except -1:
    cdef Py_ssize_t lo = max(index - 16, floor)
    # the excerpt is copied before any call into Python
    _fail_near(self, _window(self, lo, index + 16), lo, cls, reason, index, floor, limit)
    return 0


cdef int _fail_near(Decoder self, bytes window, Py_ssize_t window_lo, cls, str reason, Py_ssize_t index,
                    Py_ssize_t floor, str limit) except -1:
    """Raise the error, its excerpt cut from ``window`` (a copy of the bytes from ``window_lo`` on)."""
    cdef Py_ssize_t base = self.base
    cdef Py_ssize_t lo = max(index - 16, floor)
    cdef Py_ssize_t hi = min(index + 16, window_lo + len(window))
    raise make_decode_error(cls, reason, base + index, window, base + window_lo, base + floor, base + hi, limit)


cdef int _command_error(Decoder self, Py_ssize_t line_start, Py_ssize_t content_end) except -1:
    """Raise the reference error for a command line this twin found fault with."""
    # copies first: nothing reads the buffer after the call into Python
    cdef Py_ssize_t frame_start = self.frame_start, lo = max(line_start - 16, frame_start)
    cdef bytes window = _window(self, lo, content_end + 16)
    line = window[line_start - lo : content_end - lo]
    problem = command_problem(line, self.strict, self.commands, self.version)
    _fail_near(self, window, lo, problem[1], problem[2], line_start + problem[0], frame_start, problem[3])
    return 0


cdef int _diagnose(Decoder self, const unsigned char *b, Py_ssize_t line_start, Py_ssize_t content_end) except -1:
    """Raise the reference error for a header line this twin found fault with."""
    # copies first: nothing reads the buffer after the call into Python
    cdef Py_ssize_t frame_start = self.frame_start, lo = max(line_start - 16, frame_start)
    cdef bytes window = _window(self, lo, content_end + 16)
    line = window[line_start - lo : content_end - lo]
    problem = header_problem(
        line,
        escape_letters=self.escape_letters if self.escaped else None,
        colon_ok=self.colon_ok or not self.escaped,
        bare_cr_ok=self.bare_cr_ok,
        missing_colon_ok=self.missing_colon_ok,
        content_length_max=self.max_body if self.content_length < 0 else -1,
        invalid_utf8_ok=self.utf8_errors != NULL,
    )
    if problem is None:
        raise RuntimeError(f"fastframe twins disagree about header line {line!r}")  # a bug
    _fail_near(self, window, lo, problem[1], problem[2], line_start + problem[0], frame_start, problem[3])
    return 0


cdef int _check_line_limits(Decoder self, Py_ssize_t line_start, Py_ssize_t content_end, bint frame_exceeded) except -1:
    cdef Py_ssize_t frame_start = self.frame_start
    cdef Py_ssize_t line_at, frame_at
    cdef bint line_exceeded
    if self.command is not None and content_end > line_start and self.n_pairs >= self.max_count:
        _fail(self, LimitExceededError, TOO_MANY_HEADERS.format(self.max_count), line_start, frame_start, "max_header_count")
    line_exceeded = content_end - line_start > self.max_line
    if line_exceeded or frame_exceeded:
        line_at = line_start + self.max_line
        frame_at = frame_start + self.max_frame
        if line_exceeded and (not frame_exceeded or line_at <= frame_at):
            _fail(self, LimitExceededError, LINE_TOO_LONG.format(self.max_line), line_at, frame_start, "max_line_length")
        _fail(self, LimitExceededError, FRAME_TOO_LARGE.format(self.max_frame), frame_at, frame_start, "max_frame_size")
    return 0
