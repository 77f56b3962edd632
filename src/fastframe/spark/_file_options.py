"""The file half's options (reader and writer): names, defaults, kinds and checks.

They are parsed as the broker half's are (:mod:`._option_parsing`, one parser), so Spark's strings
and Python values are accepted and refused alike. Names follow Spark's own file
sources where one exists (``pathGlobFilter``, ``recursiveFileLookup``,
``mode``, ``compression``, ``maxPartitionBytes``) and the codec's keyword
arguments otherwise, in camelCase; ``snake_case`` spellings are accepted too,
since the match ignores case, ``_`` and ``-``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from .. import codec as fastframe_codec
from ..codec import Decoder
from ._option_parsing import Converter, choice, match, parse

MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")
SPLIT_MODES = ("auto", "scan", "none")
FILESYSTEMS = ("auto", "pyarrow", "fsspec")
#: The writer's compression choices (the reader's by file name ending: fastframe.archive.EXTENSIONS).
CODEC_SUFFIX = {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2"}
COMPRESSIONS = ("none", "gzip", "zstd", "bz2")

MiB = 1 << 20

# The codec's Decoder keyword arguments, as option name -> (kwarg, kind).
_DECODER_OPTIONS: Dict[str, Tuple[str, str]] = {
    "version": ("version", "version"),
    "strict": ("strict", "bool"),
    "escapes": ("escapes", "version?"),
    "allowColonInValue": ("allow_colon_in_value", "bool?"),
    "allowBareCr": ("allow_bare_cr", "bool?"),
    "allowMissingColon": ("allow_missing_colon", "bool"),
    "keepUndefinedEscapes": ("keep_undefined_escapes", "bool"),
    "maxHeaderCount": ("max_header_count", "int"),
    "maxLineLength": ("max_line_length", "size"),
    "maxBodySize": ("max_body_size", "size"),
    "maxFrameSize": ("max_frame_size", "size"),
}

_READ_OPTIONS: Dict[str, Tuple[str, Any]] = {
    # name: (kind, default)
    "path": ("str", None),
    "paths": ("paths", None),
    "pathGlobFilter": ("str", None),
    "recursiveFileLookup": ("bool", False),
    "mode": ("mode", "PERMISSIVE"),
    "compression": ("compression", "auto"),
    "filesystem": ("filesystem", "auto"),
    "maxRecordsPerBatch": ("int", 10_000),
    "maxBytesPerBatch": ("size", 16 * MiB),
    "readBufferSize": ("size", 1 * MiB),
    "maxPartitionBytes": ("size", 128 * MiB),
    "openCostInBytes": ("size", 4 * MiB),
    "minPartitions": ("int", 0),
    "split": ("split", "auto"),
}

_WRITE_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "path": ("str", None),
    "version": ("version", "1.2"),
    "escapes": ("version?", None),
    "contentLength": ("contentLength", False),
    "eol": ("eol", "\n"),
    "compression": ("wcompression", "none"),
    "filesystem": ("filesystem", "auto"),
    "writeIndex": ("bool", False),
    "indexInterval": ("size", 4 * MiB),
}


def _content_length(value: Any) -> Optional[bool]:
    # -> the codec's content_length: False = only for bodies with a NUL (rows come back as they
    # were), None = for every non-empty body, True = always
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower().replace("_", "-")
    table: Dict[str, Optional[bool]] = {
        "as-needed": False, "never": False, "false": False, "non-empty": None, "auto": None,
        "always": True, "true": True,
    }  # fmt: skip
    if text not in table:
        raise ValueError(f"{value!r} is not one of as-needed, non-empty, always")
    return table[text]


def _eol(value: Any) -> str:
    text = str(value)
    eols = {"\n": "\n", "\r\n": "\r\n", "lf": "\n", "crlf": "\r\n"}
    if text.lower() not in eols and text not in eols:
        raise ValueError(f"{value!r} is not one of LF, CRLF")
    return eols.get(text, eols.get(text.lower(), "\n"))


def _write_compression(value: Any) -> str:
    text = choice(value, COMPRESSIONS + ("uncompressed",))
    return "none" if text == "uncompressed" else text


#: The file half's own kinds (beside :data:`._option_parsing.KINDS`).
_FILE_KINDS: Dict[str, Converter] = {
    "mode": lambda value: choice(value, MODES, upper=True),
    "split": lambda value: choice(value, SPLIT_MODES),
    "filesystem": lambda value: choice(value, FILESYSTEMS),
    "compression": lambda value: choice(value, ("auto",) + COMPRESSIONS),
    "wcompression": _write_compression,
    "contentLength": _content_length,
    "eol": _eol,
}


class ReadOptions(NamedTuple):
    """Checked reader options (picklable: they travel to the executors)."""

    paths: Tuple[str, ...]
    path_glob_filter: Optional[str]
    recursive: bool
    mode: str
    compression: str
    filesystem: str
    max_records_per_batch: int
    max_bytes_per_batch: int
    read_buffer_size: int
    max_partition_bytes: int
    open_cost_in_bytes: int
    min_partitions: int
    split: str
    decoder: Tuple[Tuple[str, Any], ...]  # Decoder keyword arguments, as pairs

    @property
    def decoder_kwargs(self) -> Dict[str, Any]:
        return dict(self.decoder)


class WriteOptions(NamedTuple):
    """Checked writer options."""

    path: str
    version: str
    escapes: Optional[str]
    content_length: Optional[bool]
    eol: str
    compression: str
    filesystem: str
    write_index: bool
    index_interval: int

    def make_encoder(self, codec: Any = fastframe_codec) -> Any:
        return codec.Encoder(self.version, escapes=self.escapes, content_length=self.content_length, eol=self.eol)


def read_options(options: Mapping[str, Any]) -> ReadOptions:
    """Check reader options (strings from Spark, or Python values)."""
    known = {**_READ_OPTIONS, **{name: (kind, None) for name, (_, kind) in _DECODER_OPTIONS.items()}}
    values = parse(options, known, "read", _FILE_KINDS)
    given = match(options, known, "read")
    decoder = {kwarg: values[name] for name, (kwarg, _) in _DECODER_OPTIONS.items() if name in given}
    paths: List[str] = []
    if values["path"] is not None:
        paths.append(values["path"])
    if values["paths"] is not None:
        paths.extend(p for p in values["paths"] if p not in paths)
    if not paths:
        raise ValueError("no path given: use load(path), load([paths]) or option('path', ...)")
    try:
        Decoder(**decoder)  # the codec checks its own options, once, on the driver
    except (TypeError, ValueError) as exc:
        raise ValueError(f"decoder option: {exc}") from None
    for name in ("maxRecordsPerBatch", "maxBytesPerBatch", "readBufferSize", "maxPartitionBytes"):
        if values[name] < 1:
            raise ValueError(f"option {name} must be at least 1, not {values[name]}")
    if values["maxBytesPerBatch"] > 1 << 30:
        raise ValueError("option maxBytesPerBatch must be at most 1g (Arrow binary columns hold up to 2 GiB)")
    if values["minPartitions"] < 0 or values["openCostInBytes"] < 0:
        raise ValueError("options minPartitions and openCostInBytes must not be negative")
    return ReadOptions(
        paths=tuple(paths),
        path_glob_filter=values["pathGlobFilter"],
        recursive=values["recursiveFileLookup"],
        mode=values["mode"],
        compression=values["compression"],
        filesystem=values["filesystem"],
        max_records_per_batch=values["maxRecordsPerBatch"],
        max_bytes_per_batch=values["maxBytesPerBatch"],
        read_buffer_size=values["readBufferSize"],
        max_partition_bytes=values["maxPartitionBytes"],
        open_cost_in_bytes=values["openCostInBytes"],
        min_partitions=values["minPartitions"],
        split=values["split"],
        decoder=tuple(sorted(decoder.items())),
    )


def write_options(options: Mapping[str, Any]) -> WriteOptions:
    """Check writer options (strings from Spark, or Python values)."""
    values = parse(options, _WRITE_OPTIONS, "write", _FILE_KINDS)
    if not values["path"]:
        raise ValueError("no path given: use save(path) or option('path', ...)")
    if values["indexInterval"] < 1:
        raise ValueError(f"option indexInterval must be at least 1, not {values['indexInterval']}")
    opts = WriteOptions(
        path=values["path"],
        version=values["version"],
        escapes=values["escapes"],
        content_length=values["contentLength"],
        eol=values["eol"],
        compression=values["compression"],
        filesystem=values["filesystem"],
        write_index=values["writeIndex"],
        index_interval=values["indexInterval"],
    )
    opts.make_encoder()  # the codec checks its own options
    if opts.write_index and opts.compression != "none":
        raise ValueError("writeIndex needs compression none: a compressed file cannot be split")
    return opts


def option_names(kind: str) -> List[str]:
    """The documented option names of the reader (``"read"``) or the writer (``"write"``)."""
    if kind == "read":
        return sorted(list(_READ_OPTIONS) + list(_DECODER_OPTIONS))
    return sorted(_WRITE_OPTIONS)
