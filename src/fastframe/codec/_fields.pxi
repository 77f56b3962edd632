# The decoder's field caches, as module functions taking the decoder (inline where small: a
# direct C call, no vtable): short names and values by their wire bytes, (name, value) tuples by
# their two strings, the headers of the frame in progress, unescaping into scratch space.
# Included by _codec_c.pyx after _decoder.pxi.

cdef void _drop_pairs(Decoder self) noexcept:
    if self.columnar:  # the headers are in the store, not in pairs
        self.n_pairs = 0
        if self.store is not None:
            self.store.rollback()
        return
    while self.n_pairs:
        self.n_pairs -= 1
        Py_DECREF(<object>self.pairs[self.n_pairs])


cdef char *_scratch(Decoder self, Py_ssize_t size) except NULL:
    cdef char *grown
    if size > self.scratch_cap:
        grown = <char *>PyMem_Realloc(self.scratch, max(size, 256))
        if grown == NULL:
            raise MemoryError()
        self.scratch = grown
        self.scratch_cap = max(size, 256)
    return self.scratch


cdef inline CacheSlot *_slot_of(Decoder self, const unsigned char *p, Py_ssize_t size) noexcept:
    return &self.cache[_slot(_load8(p, size), p, size)]


cdef void _remember(Decoder self, const unsigned char *p, Py_ssize_t size, str text) noexcept:
    cdef CacheSlot *slot = _slot_of(self, p, size)
    cdef PyObject *old = slot.text
    Py_INCREF(text)
    slot.text = <PyObject *>text
    slot.size = size
    memcpy(slot.raw, p, size)
    Py_XDECREF(old)  # last: a finalizer it runs finds the slot whole


@cython.boundscheck(False)
@cython.wraparound(False)
cdef object _field(Decoder self, const unsigned char *p, Py_ssize_t size, bint backslash, bint unescape, bint high):
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
        slot = _slot_of(self, p, size)
        if slot.size == size and memcmp(slot.raw, p, size) == 0:
            return <object>slot.text
    if backslash and unescape:
        text = _unescape(self, p, size, high)
    elif high:
        try:
            text = PyUnicode_DecodeUTF8(<char *>p, size, self.utf8_errors)
        except UnicodeDecodeError:
            return None
    else:
        text = _ascii(p, size)
    if cacheable and text is not None:
        _remember(self, p, size, text)
    return text


@cython.boundscheck(False)
@cython.wraparound(False)
cdef object _unescape(Decoder self, const unsigned char *p, Py_ssize_t size, bint high):
    cdef Py_ssize_t i = 0, n = 0
    cdef char *out = _scratch(self, size)
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
        return PyUnicode_DecodeUTF8(out, n, self.utf8_errors)
    except UnicodeDecodeError:
        return None


cdef int _store_field_pair(Decoder self, const unsigned char *name_at, Py_ssize_t name_size, object name,
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


cdef tuple _pair(Decoder self, str name, str value):
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


cdef int _push_pair(Decoder self, tuple pair) except -1:
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


cdef tuple _take_pairs(Decoder self):
    """The frame's headers as a tuple; the references move into it."""
    cdef tuple headers = PyTuple_New(self.n_pairs)
    cdef Py_ssize_t i
    for i in range(self.n_pairs):
        PyTuple_SET_ITEM(headers, i, <object>self.pairs[i])  # steals the owned reference
    self.n_pairs = 0
    return headers
