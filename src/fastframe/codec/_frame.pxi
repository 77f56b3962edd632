# Frame and Heartbeat, and headers given by hand as a tuple of exact-str pairs.
# Included by _codec_c.pyx (one module: the parts share its cimports and C names).

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
        cdef object key
        if type(name) is str:  # the usual call: compare as str (identity, length, then bytes)
            for pair in self._headers:
                key = (<tuple>pair)[0]
                if key is name or (type(key) is str and <str>key == <str>name):
                    return (<tuple>pair)[1]
            return default
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
        # Under the dict's lock: no code of the caller's runs in this loop (exact str keys and values),
        # and on a free-threaded build no other thread changes the dict either (no-op with the GIL).
        with cython.critical_section(headers):
            out = PyTuple_New(len(<dict>headers))
            while PyDict_Next(headers, &pos, &key, &value):
                if type(<object>key) is not str or type(<object>value) is not str:
                    break
                pair = (<object>key, <object>value)
                PyObject_GC_UnTrack(<void *>pair)  # two str: never part of a cycle, nothing for the GC to visit
                Py_INCREF(pair)
                PyTuple_SET_ITEM(out, i, pair)
                i += 1
        if i != len(out):
            return normalize_headers(headers)
        PyObject_GC_UnTrack(<void *>out)  # holds only untracked pairs
        return out
    if type(headers) is tuple or type(headers) is list:
        # a list is copied first, then checked: another thread may change it in between, not after
        out = <tuple>headers if type(headers) is tuple else PyList_AsTuple(headers)
        for item in out:
            if not _exact_pair(item):
                return normalize_headers(headers)
        return out  # the pairs are immutable: shared, not copied
    return normalize_headers(headers)


cdef inline Frame _make_frame(str command, tuple headers, bytes body, Py_ssize_t offset):
    cdef Frame frame = Frame.__new__(Frame)
    frame._command = command
    frame._headers = headers
    frame._body = body
    frame._offset = offset
    return frame


@cython.no_gc  # (an int and bytes: never part of a cycle; one per EOL a broker writes after each frame)
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
