"""The prepared-shard format: tar shards and their ``index.json``, as ``python -m fastcore_ops.data.prepare`` writes.

    >>> from fastcore_ops.data.shards import read_shard_samples
    >>> samples, classes = read_shard_samples("prepared/train")   # doctest: +SKIP
"""

from .format import (INDEX_FILE, INDEX_FORMAT, INDEX_VERSION, SHARD_KEYS, JsonFields, ShardChecksumError, ShardMember,
                     file_type, is_shard_folder, parse_json, read_encoded, read_index, read_shard_samples, sha256_of,
                     verify_shards)

__all__ = [
    "INDEX_FILE", "INDEX_FORMAT", "INDEX_VERSION", "SHARD_KEYS", "JsonFields", "ShardChecksumError", "ShardMember",
    "file_type", "is_shard_folder", "parse_json", "read_encoded", "read_index", "read_shard_samples", "sha256_of",
    "verify_shards",
]
