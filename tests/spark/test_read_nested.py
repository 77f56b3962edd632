"""A folder whose files are all in subfolders (a capture archive: broker/date/files) is no silent read of
nothing: without recursiveFileLookup the reader says where the files are and which option reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastframe.spark import generate_archive, list_files, read_options


def test_a_nested_archive_without_recursive_lookup_says_why_it_found_nothing(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    generate_archive(str(root), connections=2, frames=20)
    with pytest.raises(FileNotFoundError, match=r"no input files directly in .*archive, but \d+ in subfolders.*"
                       r"recursiveFileLookup"):  # fmt: skip
        list_files(read_options({"path": str(root)}))
    nested = list_files(read_options({"path": str(root), "recursiveFileLookup": "true"}))
    assert nested and all(Path(path).parent.parent.parent == root for path, _ in nested)


def test_an_empty_folder_is_still_an_empty_read(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    assert list_files(read_options({"path": str(tmp_path / "empty")})) == []
