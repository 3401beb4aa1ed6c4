#!/usr/bin/env python3
"""Reads a table with happybase (a third-party Thrift1 client) and prints, per row in key
order: hex rowkey, info:screen_name (UTF-8), count:followers decoded as an 8-byte big-endian
signed long (HBase's counter encoding)."""
import argparse
import struct

import happybase

ap = argparse.ArgumentParser()
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, default=9090)
ap.add_argument("--table", required=True)
a = ap.parse_args()

conn = happybase.Connection(a.host, a.port)
for key, data in conn.table(a.table).scan():
    name = data[b"info:screen_name"].decode("utf-8")
    (followers,) = struct.unpack(">q", data[b"count:followers"])
    print(f"{key.hex()}\t{name}\t{followers}")
conn.close()
