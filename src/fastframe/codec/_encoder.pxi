# Encoder and encode(): two passes, sizing then writing once.
# Included by _codec_c.pyx (one module: the parts share its cimports and C names).

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
    cdef const unsigned char *seen_letters[ENCODER_SLOTS]  # the escape table each verdict was made with
    cdef Py_ssize_t seen_extra[ENCODER_SLOTS]

    def __cinit__(self):
        cdef int i
        for i in range(ENCODER_SLOTS):
            self.seen[i] = NULL

    def __dealloc__(self):
        cdef int i
        for i in range(ENCODER_SLOTS):
            Py_XDECREF(self.seen[i])

    cdef inline Py_ssize_t _extra(self, str text, const char *data, Py_ssize_t size,
                                  const unsigned char *letters, bint is_name) noexcept:
        """_escape_extra, remembered per str object and escape table (names and values repeat).

        Keyed by the table too: ``__init__`` may be called again (from another thread, or from a
        str subclass's ``__str__`` mid-encode), and a verdict sized for one table must never size
        a field written with another.
        """
        cdef size_t slot
        cdef Py_ssize_t extra
        cdef PyObject *old
        if letters == NULL:
            return _escape_extra(data, size, NULL, is_name)
        slot = ((<size_t><PyObject *>text) >> 4) * 0x9E3779B1u
        slot = (slot ^ (slot >> 16)) & (ENCODER_SLOTS - 1)
        # Under the encoder's lock: encode() shares one encoder between threads, and on a
        # free-threaded build a slot could change between the compare and the read (no-op with the GIL).
        with cython.critical_section(self):
            if self.seen[slot] == <PyObject *>text and self.seen_letters[slot] == letters:
                return self.seen_extra[slot]
        extra = _escape_extra(data, size, letters, is_name)
        Py_INCREF(text)
        with cython.critical_section(self):
            old = self.seen[slot]
            self.seen[slot] = <PyObject *>text
            self.seen_letters[slot] = letters
            self.seen_extra[slot] = extra
        # outside the lock, and last: a str subclass's finalizer may encode with this encoder
        # (and take the lock), and finds the cache whole
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

    def encode_sends(self, list sends, Py_ssize_t start=0):
        """The everyday SENDs of ``sends[start:]`` encoded back to back, and where they stopped.

        Each item is ``(destination, body, headers, content_type, transaction)``, the arguments of
        :meth:`fastframe.protocol.ClientConnection.send`. Starting at ``start`` (0 when negative),
        each one whose ``destination`` is a str, ``body`` bytes, ``content_type`` None or a str,
        and ``headers`` and ``transaction`` None is encoded as ``encode("SEND", pairs, body)``
        would, ``pairs`` being ``destination`` then ``content-type`` when given. Returns the bytes
        of those frames and the index of the first item it did not encode (``len(sends)`` when it
        encoded them all): another shape, or a frame the encoder refuses. The caller takes that
        item by its general path (which reports a refusal), then may call again from the next one.
        """
        cdef Py_ssize_t i = start if start > 0 else 0, end = len(sends)
        cdef list chunks = []
        cdef tuple send
        cdef object item, pairs, data
        while i < end:
            item = sends[i]
            if type(item) is not tuple or len(<tuple>item) != 5:
                break
            send = <tuple>item
            destination, body, headers, content_type, transaction = send
            if (
                headers is not None or transaction is not None
                or type(destination) is not str or type(body) is not bytes
            ):
                break
            if content_type is None:
                pairs = (("destination", destination),)
            elif type(content_type) is str:
                pairs = (("destination", destination), ("content-type", content_type))
            else:
                break
            data = self._encode("SEND", pairs, <bytes>body)
            if data is None:
                break
            chunks.append(data)
            i += 1
        return b"".join(chunks), i

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
        """Point ``fields`` at each name and value; 0 when ``headers`` is not a dict, list or tuple of exact-str
        pairs, or no longer has ``n`` of them (the caller normalizes them first). With the GIL the pointers are
        borrowed: nothing of the caller's runs until they are used (exact str, no Python code). A free-threaded
        build takes a reference to each, under the container's lock (the caller releases all 2n with
        _release_fields): another thread may change the caller's dict or list during the call."""
        cdef Py_ssize_t pos = 0, i = 0
        cdef PyObject *key
        cdef PyObject *value
        cdef object item
        cdef bint ok = True
        with cython.critical_section(headers):
            if type(headers) is dict:
                if PyDict_Size(headers) != n:
                    ok = False
                while ok and PyDict_Next(headers, &pos, &key, &value):
                    if type(<object>key) is not str or type(<object>value) is not str:
                        ok = False
                    else:
                        fields[2 * i].text = key
                        fields[2 * i + 1].text = value
                        if FREE_THREADED:
                            Py_INCREF(<object>key)
                            Py_INCREF(<object>value)
                        i += 1
            else:
                if len(headers) != n:
                    ok = False
                while ok and i < n:
                    item = (<tuple>headers)[i] if type(headers) is tuple else (<list>headers)[i]
                    if not _exact_pair(item):
                        ok = False
                    else:
                        fields[2 * i].text = <PyObject *>(<tuple>item)[0]
                        fields[2 * i + 1].text = <PyObject *>(<tuple>item)[1]
                        if FREE_THREADED:
                            Py_INCREF(<object>fields[2 * i].text)
                            Py_INCREF(<object>fields[2 * i + 1].text)
                        i += 1
        if not ok and FREE_THREADED:
            _release_fields(fields, 2 * i)
        return ok

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef object _encode(self, str command, object headers, bytes body):
        """The frame's bytes, or None when it cannot be encoded (the caller finds out why).

        ``headers``: a dict, list or tuple, normalized here when not of exact-str pairs.
        """
        cdef Py_ssize_t command_size, body_size = len(body), total, i, n
        # the options read once, into locals: __init__ may run again while this call runs
        # (another thread, or a str subclass's __str__), and one frame is written with one set
        cdef bytes eol = self.eol
        cdef int escape_set = self.escape_set, content_length = self.content_length
        cdef Py_ssize_t eol_size = len(eol), length_size = 0
        cdef const char *command_data
        cdef const char *body_data = PyBytes_AS_STRING(body)
        cdef const char *eol_data = PyBytes_AS_STRING(eol)
        cdef bint escape, has_length = False, gathered
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
        command_data = _utf8_or_null(<PyObject *>command, &command_size)
        if command_data == NULL and not _encodable():
            return None
        if command_size == 0 or not _clean_line(command_data, command_size):
            return None
        escape = escape_set >= 0 and not _unescaped_command(command_data, command_size)
        letters = _ESCAPE_LETTER[escape_set] if escape else NULL
        total = command_size + eol_size
        if 2 * n > 64:
            fields = <Field *>PyMem_Malloc(2 * n * sizeof(Field))
            if fields == NULL:
                raise MemoryError()
        gathered = False
        try:
            gathered = self._gather(headers, fields, n)
            if not gathered:
                # a pair of str subclasses, a list for a pair, or a TypeError; again on the tuple, whose size
                # may differ (a str subclass's __str__ may change the caller's list)
                return self._encode(command, _normalized(headers), body)
            # pass 1: validate, and size every name and value once
            for i in range(n):
                name = &fields[2 * i]
                value = &fields[2 * i + 1]
                name.data = _utf8_or_null(name.text, &name.size)
                if name.data == NULL and not _encodable():
                    return None
                value.data = _utf8_or_null(value.text, &value.size)
                if value.data == NULL and not _encodable():
                    return None
                if name.size == 0:
                    return None
                name.extra = self._extra(<str>name.text, name.data, name.size, letters, True)
                value.extra = self._extra(<str>value.text, value.data, value.size, letters, False)
                if name.extra < 0 or value.extra < 0:
                    return None
                total += name.size + name.extra + 1 + value.size + value.extra + eol_size
                if not has_length and name.size == 14 and memcmp(name.data, b"content-length", 14) == 0:
                    has_length = True
                    if not _is_decimal(value.data, value.size, body_size):
                        return None
            if not has_length and (
                (content_length == -1 and body_size) or content_length == 1
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
            if gathered and FREE_THREADED:
                _release_fields(fields, 2 * n)
            if fields != stack_fields:
                PyMem_Free(fields)


cdef inline bint _unescaped_command(const char *data, Py_ssize_t size) noexcept:
    """True for CONNECT, STOMP and CONNECTED (UNESCAPED_COMMANDS), whose headers are sent as they are."""
    if size == 7:
        return memcmp(data, b"CONNECT", 7) == 0
    if size == 5:
        return memcmp(data, b"STOMP", 5) == 0
    return size == 9 and memcmp(data, b"CONNECTED", 9) == 0


cdef int _encodable() except -1:
    """After _utf8_or_null gave NULL: 0 for a str with no UTF-8 (a lone surrogate: the caller returns None
    and encode_error says why), else the error raised (MemoryError). No try block on the hot path: Cython
    saves the exception state at every try."""
    if PyErr_ExceptionMatches(UnicodeEncodeError):
        PyErr_Clear()
        return 0
    return -1


cdef inline bint _clean_line(const char *data, Py_ssize_t size) noexcept:
    """No LF, CR or NUL in a command (a few bytes: one pass beats three memchr calls)."""
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(size):
        c = <unsigned char>data[i]
        if c == LF or c == CR or c == 0:
            return False
    return True


cdef struct Field:
    PyObject *text  # the name or value (borrowed; a reference on a free-threaded build, see _gather)
    const char *data  # UTF-8, owned by the str
    Py_ssize_t size
    Py_ssize_t extra  # bytes escaping adds


cdef inline void _release_fields(Field *fields, Py_ssize_t count) noexcept:
    cdef Py_ssize_t i
    for i in range(count):
        Py_DECREF(<object>fields[i].text)


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
