# route_messages: the receiving side's fast path (see the Python twin's docstring, the reference):
# a read's everyday MESSAGEs go from the decoded list into their subscriptions' queues in one call,
# without a Python frame per message (a SlotMaker builds each message object in C; another make is
# called). first_row_without: a columnar subscription's check of a read's rows, on the Columns' buffers.

cdef extern from *:
    """
    #include <structmember.h>
    /* what object.__new__ does for a class whose __new__ is object's (SlotMaker checked that) */
    static PyObject *ff_alloc(PyObject *cls) { return ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0); }
    /* where a slot's member descriptor keeps its object, or -1 when it is not a writable object slot */
    static Py_ssize_t ff_slot_offset(PyObject *descr) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        return member->type == T_OBJECT_EX && !(member->flags & READONLY) ? member->offset : -1;
    }
    /* set the slot at offset of an object just made (what the member descriptor's __set__ does) */
    static void ff_slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        PyObject **slot = (PyObject **)((char *)obj + offset);
        PyObject *old = *slot;
        Py_INCREF(value);
        *slot = value;
        Py_XDECREF(old);
    }
    """
    object ff_alloc(object cls)
    Py_ssize_t ff_slot_offset(object descr)
    void ff_slot_set(object obj, Py_ssize_t offset, object value)


cdef class SlotMaker:
    """Builds instances of ``cls`` without calling its ``__init__``: ``maker(*values)`` returns a new
    instance whose slots ``names`` hold ``values`` followed by ``fixed``.

    The instance is made as ``object.__new__(cls)`` makes it and each slot is set through its member
    descriptor, as ``object.__setattr__`` would (a ``__setattr__`` of the class's own is not called).
    :func:`route_messages` builds each message this way when its ``make`` is a SlotMaker, in the
    compiled twin without a Python call (the receiving fast path's one object per MESSAGE).
    ``cls`` must be a class ``object.__new__`` builds and each name one of its slots (a
    :class:`TypeError` or :class:`ValueError` otherwise); a call with other than
    ``len(names) - len(fixed)`` values is a :class:`TypeError`. ``SlotMaker.compiled`` says whether
    it is the compiled twin's: the Python twin's, a Python loop over the descriptors, costs more
    than a plain ``__init__`` call, so a caller may prefer the class's own constructor there.
    """

    compiled = True

    cdef readonly object cls
    cdef readonly tuple names, fixed
    cdef Py_ssize_t _count, _slots
    cdef Py_ssize_t _offsets[MAX_SLOTS]  # (slot_descriptors refuses more names)

    def __init__(self, cls, names, fixed=()):
        cdef Py_ssize_t i = 0
        for descriptor in slot_descriptors(cls, names, fixed):  # (each one of cls's own member slots)
            self._offsets[i] = ff_slot_offset(descriptor)
            if self._offsets[i] < 0:
                raise ValueError(f"{names[i]!r} is not a writable slot of {cls.__qualname__}")
            i += 1
        self.cls = cls
        self.names = tuple(names)
        self.fixed = tuple(fixed)
        self._slots = len(names)
        self._count = len(names) - len(fixed)

    def __call__(self, *values):
        if len(values) != self._count:
            raise TypeError(wrong_count(self._count, len(values)))
        cdef object made = ff_alloc(self.cls)
        cdef Py_ssize_t i
        for i in range(self._count):
            ff_slot_set(made, self._offsets[i], values[i])
        self._fix(made)
        return made

    def __repr__(self):
        return f"SlotMaker({self.cls.__qualname__}, {self.names!r}, fixed={len(self.fixed)})"

    cdef inline void _fix(self, made):
        cdef tuple fixed = self.fixed
        cdef Py_ssize_t i
        for i in range(self._count, self._slots):
            ff_slot_set(made, self._offsets[i], fixed[i - self._count])

    cdef object _make5(self, a, b, c, d, e):
        # a call with five values, without their tuple (route_messages' message)
        cdef object made = ff_alloc(self.cls)
        ff_slot_set(made, self._offsets[0], a)
        ff_slot_set(made, self._offsets[1], b)
        ff_slot_set(made, self._offsets[2], c)
        ff_slot_set(made, self._offsets[3], d)
        ff_slot_set(made, self._offsets[4], e)
        self._fix(made)
        return made

cdef object _interned(tuple texts, str text):
    # the very str the decoder returns for ``text`` (its table's), so most tests are one identity check
    for candidate in texts:
        if candidate == text:
            return candidate
    return text


cdef object CMD_MESSAGE = _interned(_command_objects, "MESSAGE")
cdef object NAME_SUBSCRIPTION = _interned(_name_objects, "subscription")
cdef object NAME_MESSAGE_ID = _interned(_name_objects, "message-id")
cdef object NAME_ACK = _interned(_name_objects, "ack")
cdef object NAME_DESTINATION = _interned(_name_objects, "destination")


def route_messages(
    list items, Py_ssize_t start, dict routes, bint ack_header, dict unacked, make, list filled, list events=None,
    beat=None,
):
    """Queue the everyday MESSAGEs of ``items[start:]`` straight into their subscriptions' queues.

    The receiving side's fast path (a client connection calls it on each read's decoded items): starting
    at ``start`` (0 when negative), each :class:`fastframe.Frame` whose command is ``MESSAGE``, with
    ``subscription`` and ``message-id`` headers (str) and a subscription in ``routes``, becomes
    ``make(frame, subscription, message_id, ack_id, destination)`` appended to that queue (a
    :class:`SlotMaker` of five values is built without a Python call in the compiled twin); ``ack_id`` is
    the ``ack`` header when ``ack_header`` (STOMP 1.2) and it is set, else the message id, and a
    subscription that acknowledges (``manual``) records ``unacked[ack_id] = (subscription,
    message_id)``. ``routes`` maps a subscription id to ``(owner, queue, manual)``: ``queue`` is
    appended to, and ``owner`` is added to ``filled`` (once per run of messages; the owner bounds its
    queue after the read). With ``events`` (a list), each :class:`fastframe.Heartbeat` item appends
    ``beat`` to it and routing goes on (the EOL RabbitMQ and ActiveMQ write after every frame).
    Returns the index of the first item it did not queue (``len(items)`` when it queued them all): a
    heart-beat (without ``events``), another frame, an unusual MESSAGE; the caller takes that item by
    its general path, then may call again from the next one, so the order of everything is kept.
    """
    cdef Py_ssize_t i = start, end = len(items), j, count
    cdef object item, key, sub_id, message_id, ack, destination, ack_id, queue, owner
    cdef Frame frame
    cdef tuple headers, pair, route
    cdef PyObject *found
    cdef SlotMaker maker = None
    if type(make) is SlotMaker and (<SlotMaker>make)._count == 5:
        maker = <SlotMaker>make
    if i < 0:
        i = 0
    while i < end:
        item = items[i]
        if type(item) is not Frame:
            if type(item) is Heartbeat and events is not None:
                events.append(beat)
                i += 1
                continue
            return i
        frame = <Frame>item
        if frame._command is not CMD_MESSAGE and frame._command != "MESSAGE":
            return i
        sub_id = message_id = ack = destination = None
        headers = frame._headers
        count = len(headers)
        for j in range(count):  # the first of each name, as Frame.get (names are interned: identity first)
            pair = <tuple>headers[j]
            key = pair[0]
            if _is_name(key, NAME_SUBSCRIPTION):
                if sub_id is None:
                    sub_id = pair[1]
            elif _is_name(key, NAME_MESSAGE_ID):
                if message_id is None:
                    message_id = pair[1]
            elif _is_name(key, NAME_ACK):
                if ack is None:
                    ack = pair[1]
            elif _is_name(key, NAME_DESTINATION):
                if destination is None:
                    destination = pair[1]
        if type(sub_id) is not str or type(message_id) is not str:
            return i
        found = PyDict_GetItem(routes, sub_id)
        if found is NULL:
            return i
        route = <tuple>found
        owner, queue = route[0], route[1]
        ack_id = (ack if ack_header else None) or message_id
        if route[2]:
            unacked[ack_id] = (sub_id, message_id)
        if maker is not None:
            queue.append(maker._make5(frame, sub_id, message_id, ack_id, destination))
        else:
            queue.append(make(frame, sub_id, message_id, ack_id, destination))
        if not filled or filled[len(filled) - 1] is not owner:
            filled.append(owner)
        i += 1
    return end


cdef inline bint _is_name(object key, str name) except -1:
    # key == name, for a header name (a str: the decoder's, usually the very object) against one of
    # the interned names above: by identity, else by length before the comparison
    if key is name:
        return True
    if type(key) is str:
        return (
            PyUnicode_GET_LENGTH(<PyObject *>key) == PyUnicode_GET_LENGTH(<PyObject *>name) and <str>key == name
        )
    return key == name


cdef inline Py_ssize_t _int32_at(const unsigned char *p, Py_ssize_t index) noexcept:
    # the index-th little-endian int32 of p (Arrow's offsets)
    p += 4 * index
    return <Py_ssize_t><int>(<unsigned int>p[0] | (<unsigned int>p[1] << 8) | (<unsigned int>p[2] << 16)
                             | (<unsigned int>p[3] << 24))


def first_row_without(columns, name, value=None):
    """The first row of ``columns`` (a :class:`fastframe.Columns`) with no ``name`` header, or, with
    ``value``, whose first ``name`` header is not ``value``; ``columns.rows`` when every row has it.

    The check a columnar subscription makes of each read (``message-id`` present, ``subscription`` its
    own), one pass over the rows' header names with no object per row. Raises TypeError when a buffer
    is not bytes and ValueError when the offsets point outside their buffers (columns made by hand).
    """
    cdef object heads_obj = columns.header_offsets, names_obj = columns.name_offsets
    cdef object name_data_obj = columns.name_data, values_obj = columns.value_offsets
    cdef object value_data_obj = columns.value_data
    if (type(heads_obj) is not bytes or type(names_obj) is not bytes or type(name_data_obj) is not bytes
            or type(values_obj) is not bytes or type(value_data_obj) is not bytes):
        raise TypeError(NOT_COLUMNS.format("its offsets and data must be bytes"))
    cdef Py_ssize_t rows = columns.rows, row, first, end, index, start, stop, count
    if type(name) is not str or (value is not None and type(value) is not str):
        wrong = ("name", name) if type(name) is not str else ("value", value)
        raise TypeError(NOT_TEXT.format(wrong[0], type(wrong[1]).__name__))
    cdef bytes key = (<str>name).encode()
    cdef bytes want = None if value is None else (<str>value).encode()
    cdef Py_ssize_t key_size = len(key), want_size = 0 if want is None else len(want)
    cdef Py_ssize_t name_size = len(<bytes>name_data_obj), value_size = len(<bytes>value_data_obj)
    cdef const unsigned char *heads = <const unsigned char *>PyBytes_AS_STRING(heads_obj)
    cdef const unsigned char *names = <const unsigned char *>PyBytes_AS_STRING(names_obj)
    cdef const unsigned char *values = <const unsigned char *>PyBytes_AS_STRING(values_obj)
    cdef const char *name_data = PyBytes_AS_STRING(name_data_obj)
    cdef const char *value_data = PyBytes_AS_STRING(value_data_obj)
    cdef bint found
    if rows < 0 or len(<bytes>heads_obj) < 4 * (rows + 1):
        raise ValueError(NOT_COLUMNS.format("header_offsets holds fewer than rows + 1 offsets"))
    count = _int32_at(heads, rows)
    if count < 0 or len(<bytes>names_obj) < 4 * (count + 1) or len(<bytes>values_obj) < 4 * (count + 1):
        raise ValueError(NOT_COLUMNS.format("name_offsets or value_offsets hold fewer offsets than headers"))
    for row in range(rows):
        first, end = _int32_at(heads, row), _int32_at(heads, row + 1)
        if not (0 <= first <= end <= count):
            raise ValueError(NOT_COLUMNS.format("header_offsets do not rise within the headers"))
        found = False
        for index in range(first, end):
            start, stop = _int32_at(names, index), _int32_at(names, index + 1)
            if not (0 <= start <= stop <= name_size):
                raise ValueError(NOT_COLUMNS.format("name_offsets point outside name_data"))
            if stop - start != key_size or memcmp(name_data + start, PyBytes_AS_STRING(key), key_size) != 0:
                continue
            if want is None:
                found = True
                break  # (the first header of the name decides)
            start, stop = _int32_at(values, index), _int32_at(values, index + 1)
            if not (0 <= start <= stop <= value_size):
                raise ValueError(NOT_COLUMNS.format("value_offsets point outside value_data"))
            if stop - start != want_size or memcmp(value_data + start, PyBytes_AS_STRING(want), want_size) != 0:
                return row
            found = True
            break
        if not found:
            return row
    return rows
