# route_messages: the receiving side's fast path (see the Python twin's docstring, the reference):
# a read's everyday MESSAGEs go from the decoded list into their subscriptions' queues in one call,
# without a Python frame per message but the queue's message class.

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


def route_messages(list items, Py_ssize_t start, dict routes, bint ack_header, dict unacked, make, list filled):
    """Queue the everyday MESSAGEs of ``items[start:]`` straight into their subscriptions' queues.

    The receiving side's fast path (a client connection calls it on each read's decoded items): starting
    at ``start`` (0 when negative), each :class:`fastframe.Frame` whose command is ``MESSAGE``, with
    ``subscription`` and ``message-id`` headers (str) and a subscription in ``routes``, becomes
    ``make(frame, subscription, message_id, ack_id, destination)`` appended to that queue; ``ack_id`` is
    the ``ack`` header when ``ack_header`` (STOMP 1.2) and it is set, else the message id, and a
    subscription that acknowledges (``manual``) records ``unacked[ack_id] = (subscription,
    message_id)``. ``routes`` maps a subscription id to ``(owner, queue, manual)``: ``queue`` is
    appended to, and ``owner`` is added to ``filled`` (once per run of messages; the owner bounds its
    queue after the read). Returns the index of the first item it did not queue (``len(items)`` when it
    queued them all): a heart-beat, another frame, an unusual MESSAGE; the caller takes that item by its
    general path, then may call again from the next one, so the order of everything is kept.
    """
    cdef Py_ssize_t i = start, end = len(items), j, count
    cdef object item, key, sub_id, message_id, ack, destination, ack_id, queue, owner
    cdef Frame frame
    cdef tuple headers, pair, route
    cdef PyObject *found
    if i < 0:
        i = 0
    while i < end:
        item = items[i]
        if type(item) is not Frame:
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
            if key is NAME_SUBSCRIPTION or key == "subscription":
                if sub_id is None:
                    sub_id = pair[1]
            elif key is NAME_MESSAGE_ID or key == "message-id":
                if message_id is None:
                    message_id = pair[1]
            elif key is NAME_ACK or key == "ack":
                if ack is None:
                    ack = pair[1]
            elif key is NAME_DESTINATION or key == "destination":
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
        queue.append(make(frame, sub_id, message_id, ack_id, destination))
        if not filled or filled[len(filled) - 1] is not owner:
            filled.append(owner)
        i += 1
    return end
