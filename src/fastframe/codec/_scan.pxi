# Scanning helpers: interned commands, the field cache's hash, word-at-a-time byte tests, escape tables.
# Included by _codec_c.pyx (one module: the parts share its cimports and C names).

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
