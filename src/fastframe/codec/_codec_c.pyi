# The compiled twin has exactly the Python twin's API: type checkers read the reference
# (Decoder.get_buffer(sizehint) -> memoryview and buffer_updated(nbytes) included).
from ._codec_py import IMPLEMENTATION as IMPLEMENTATION
from ._codec_py import ColumnDecoder as ColumnDecoder
from ._codec_py import Decoder as Decoder
from ._codec_py import Encoder as Encoder
from ._codec_py import Frame as Frame
from ._codec_py import Heartbeat as Heartbeat
from ._codec_py import SlotMaker as SlotMaker
from ._codec_py import decode as decode
from ._codec_py import encode as encode
from ._codec_py import first_row_without as first_row_without
from ._codec_py import route_messages as route_messages
from ._codec_py import to_columns as to_columns
