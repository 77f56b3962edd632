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
    """Queue the everyday MESSAGEs of ``items[start:]`` straight into their subscriptions' queues;
    the index of the first item not queued (see the Python twin)."""
    cdef Py_ssize_t i = start, end = len(items), j, count
    cdef object item, key, value, sub_id, message_id, ack, destination, ack_id, queue, owner
    cdef Frame frame
    cdef tuple headers, pair, route
    cdef PyObject *found
    cdef Py_ssize_t room
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
        if len(queue) >= <Py_ssize_t>route[2]:
            return i
        ack_id = (ack if ack_header else None) or message_id
        if route[3]:
            unacked[ack_id] = (sub_id, message_id)
        queue.append(make(frame, sub_id, message_id, ack_id, destination))
        if not filled or filled[len(filled) - 1] is not owner:
            filled.append(owner)
        i += 1
    return end
