"""fastframe.archive: STOMP captures kept as files, and the helpers that read and write them.

What the Spark layer, the capture recorder and the command line share about an *archive* (a tree of
recorded frame streams), with the codec and the standard library only:

* files on any filesystem (local paths; ``pyarrow.fs`` or ``fsspec`` for remote ones): listing,
  opening with compression by name, sizes given as text (``_files``); gzip, zstd and bz2 streams
  without pyarrow (``_compression``: zstd needs the ``zstd`` extra before Python 3.14);
* the split index ``<file>.ffidx``: proven frame boundaries where a file may be split
  (:func:`write_index`; ``_split_index``);
* the arrival-time sidecar ``<file>.fftimes`` (:func:`read_times`; ``_arrival_times``);
* seeded samples: one broker's stream (:func:`generate_stream`; ``_sample_stream``) and archives of
  them (:func:`generate_archive`; ``_sample``).

``__all__`` is the public API; the other names (re-exported ``as`` themselves) are what fastframe's
own layers use, documented in their modules.
"""

from __future__ import annotations

from ._arrival_times import (
    MAGIC as MAGIC,
)
from ._arrival_times import (
    RECORD as RECORD,
)
from ._arrival_times import (
    read_raw as read_raw,
)
from ._arrival_times import (
    read_times,
)
from ._arrival_times import (
    times_path as times_path,
)
from ._compression import (
    COMPRESSED_SUFFIXES as COMPRESSED_SUFFIXES,
)
from ._compression import (
    compressed_reader as compressed_reader,
)
from ._compression import (
    compressed_writer as compressed_writer,
)
from ._compression import (
    require_compression as require_compression,
)
from ._files import (
    EXTENSIONS as EXTENSIONS,
)
from ._files import (
    INDEX_SUFFIX as INDEX_SUFFIX,
)
from ._files import (
    TIMES_SUFFIX as TIMES_SUFFIX,
)
from ._files import (
    basename as basename,
)
from ._files import (
    compression_for as compression_for,
)
from ._files import (
    is_local as is_local,
)
from ._files import (
    iter_files as iter_files,
)
from ._files import (
    open_stream as open_stream,
)
from ._files import (
    parse_size as parse_size,
)
from ._files import (
    resolve as resolve,
)
from ._sample import (
    generate_archive,
)
from ._sample_stream import (
    DEFAULT_SEED,
    generate_stream,
)
from ._split_index import (
    choose_splits as choose_splits,
)
from ._split_index import (
    decoder_signature as decoder_signature,
)
from ._split_index import (
    index_path as index_path,
)
from ._split_index import (
    load_checkpoints as load_checkpoints,
)
from ._split_index import (
    make_index as make_index,
)
from ._split_index import (
    scan_checkpoints as scan_checkpoints,
)
from ._split_index import (
    write_index,
)

__all__ = ["DEFAULT_SEED", "generate_archive", "generate_stream", "read_times", "write_index"]
