# ColumnDecoder: the Decoder writing its rows into a _ColumnStore (_columns.pxi) instead of
# making Frame objects; the same steps, options, errors and offsets.
# Included by _codec_c.pyx after _decoder.pxi.

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
        if self.utf8_errors != NULL:
            raise ValueError(NO_INVALID_UTF8)

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
