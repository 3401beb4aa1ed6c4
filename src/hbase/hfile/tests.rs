use proptest::prelude::*;

use super::block::{header, BlockType, HEADER_SIZE};
use super::index::MAX_CHUNK_SIZE;
use super::meta::{self, key, FileTrailerProto};
use super::reader::{parse, read_vlong, OwnedCell};
use super::*;

fn cell<'a>(row: &'a [u8], qualifier: &'a [u8], ts: i64, value: &'a [u8]) -> Cell<'a> {
    Cell {
        row,
        family: b"f",
        qualifier,
        timestamp: ts,
        value,
        kind: TYPE_PUT,
    }
}

fn options(block_size: usize) -> WriterOptions {
    WriterOptions {
        block_size,
        created_ms: 1_700_000_000_000,
        source_task: "unit".into(),
        ..WriterOptions::default()
    }
}

fn write(cells: &[OwnedCell], opts: WriterOptions) -> (Vec<u8>, HFileSummary) {
    let mut w = HFileWriter::new(Vec::new(), opts).unwrap();
    for c in cells {
        w.append(&Cell {
            row: &c.row,
            family: &c.family,
            qualifier: &c.qualifier,
            timestamp: c.timestamp,
            value: &c.value,
            kind: c.kind,
        })
        .unwrap();
    }
    w.finish().unwrap()
}

fn owned(row: Vec<u8>, qualifier: &[u8], ts: i64, value: Vec<u8>) -> OwnedCell {
    OwnedCell {
        row,
        family: b"f".to_vec(),
        qualifier: qualifier.to_vec(),
        timestamp: ts,
        value,
        kind: TYPE_PUT,
    }
}

#[test]
fn vlongs_match_hadoop_writable_utils() {
    let cases: &[(i64, &[u8])] = &[
        (0, &[0x00]),
        (127, &[0x7f]),
        (-112, &[0x90]),
        (128, &[0x8f, 0x80]),
        (255, &[0x8f, 0xff]),
        (256, &[0x8e, 0x01, 0x00]),
        (-113, &[0x87, 0x70]),
        (65_536, &[0x8d, 0x01, 0x00, 0x00]),
        (
            i64::MAX,
            &[0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ),
    ];
    for &(v, bytes) in cases {
        let mut out = Vec::new();
        write_vlong(&mut out, v);
        assert_eq!(out, bytes, "{v}");
        assert_eq!(read_vlong(&out), (v, bytes.len()));
    }
}

#[test]
fn crc32c_is_castagnoli() {
    // RFC 3720 B.4 and the common check value.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
    assert_eq!(crc32c::crc32c(&[0xffu8; 32]), 0x62a8_ab43);
}

#[test]
fn block_header_bytes() {
    // 100 bytes of data: 133 framed bytes, one 16 KiB chunk, one 4-byte checksum.
    let h = header(BlockType::Data, 100, 100, 4096, 16 * 1024);
    #[rustfmt::skip]
    let expected: [u8; HEADER_SIZE] = [
        b'D', b'A', b'T', b'A', b'B', b'L', b'K', b'*',
        0, 0, 0, 104,                 // on disk without header: data + checksum
        0, 0, 0, 100,                 // uncompressed without header
        0, 0, 0, 0, 0, 0, 0x10, 0,    // previous data block at 4096
        2,                            // CRC32C
        0, 0, 0x40, 0,                // 16,384 bytes per checksum
        0, 0, 0, 133,                 // header + data
    ];
    assert_eq!(h, expected);
    // Past one chunk: 16,400 framed bytes need two checksums.
    let h = header(
        BlockType::LeafIndex,
        16_400 - HEADER_SIZE,
        16_400 - HEADER_SIZE,
        -1,
        16 * 1024,
    );
    assert_eq!(&h[..8], b"IDXLEAF2");
    assert_eq!(
        i32::from_be_bytes(h[8..12].try_into().unwrap()),
        16_400 - 33 + 8
    );
    assert_eq!(&h[16..24], &[0xff; 8]);
}

#[test]
fn keyvalue_bytes() {
    let mut out = Vec::new();
    cell(b"r1", b"q", 5, b"v").write_to_block(&mut out);
    #[rustfmt::skip]
    let expected: &[u8] = &[
        0, 0, 0, 16,            // key length: 2 + 2 + 1 + 1 + 1 + 8 + 1
        0, 0, 0, 1,             // value length
        0, 2, b'r', b'1',       // row
        1, b'f',                // family
        b'q',                   // qualifier
        0, 0, 0, 0, 0, 0, 0, 5, // timestamp
        4,                      // Put
        b'v',                   // value
        0,                      // memstore timestamp (vlong 0)
    ];
    assert_eq!(out, expected);
    let key = cell(b"r1", b"q", 5, b"v").key();
    assert_eq!(Cell::from_key(&key).unwrap(), cell(b"r1", b"q", 5, b""));
}

#[test]
fn cell_order_is_hbase_order() {
    let a = cell(b"a", b"q", 1, b"");
    // Rows as unsigned bytes: 0x80 sorts after 0x7f, a prefix before its extension.
    assert!(cell(&[0x7f], b"q", 1, b"")
        .cmp_order(&cell(&[0x80], b"q", 1, b""))
        .is_lt());
    assert!(a.cmp_order(&cell(b"ab", b"q", 1, b"")).is_lt());
    assert!(a.cmp_order(&cell(b"a", b"r", 1, b"")).is_lt());
    // Newer timestamps first.
    assert!(cell(b"a", b"q", 9, b"").cmp_order(&a).is_lt());
}

#[test]
fn trailer_is_4096_bytes_ending_in_the_version() {
    let t = meta::encode_trailer(&FileTrailerProto {
        file_info_offset: Some(1),
        entry_count: Some(2),
        comparator_class_name: Some(meta::COMPARATOR.into()),
        compression_codec: Some(meta::COMPRESSION_NONE),
        ..Default::default()
    });
    assert_eq!(t.len(), 4096);
    assert_eq!(&t[..8], b"TRABLK\"$");
    assert_eq!(&t[4092..], &[0x03, 0, 0, 0x03]);
    // Length-delimited protobuf: field 1 = 1, field 7 = 2, field 11, field 12 = 2.
    assert_eq!(t[8] as usize, 4 + 2 + meta::COMPARATOR.len() + 2);
    assert_eq!(&t[9..13], &[0x08, 0x01, 0x38, 0x02]);
    assert_eq!(meta::decode_trailer(&t).unwrap().entry_count, Some(2));
}

#[test]
fn a_small_file_matches_its_golden_bytes() {
    let cells = vec![
        owned(b"row-a".to_vec(), b"n", 1_000, b"alice".to_vec()),
        owned(b"row-a".to_vec(), b"x", 1_000, 7i64.to_be_bytes().to_vec()),
        owned(b"row-b".to_vec(), b"n", 2_000, b"bob".to_vec()),
    ];
    let (bytes, summary) = write(&cells, options(64 * 1024));
    assert_eq!(summary.cells, 3);
    assert_eq!(summary.index_levels, 1);
    let mut hex = String::new();
    let end = bytes.len() - meta::TRAILER_SIZE + 128;
    for (i, line) in bytes[..end].chunks(32).enumerate() {
        let h: String = line.iter().map(|b| format!("{b:02x}")).collect();
        hex.push_str(&format!("{:06x} {h}\n", i * 32));
    }
    hex.push_str(&format!(
        "… zeros to {:06x}, then 03000003\n",
        bytes.len() - 4
    ));
    assert!(bytes[end..bytes.len() - 4].iter().all(|&b| b == 0));
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/hfile/three-cells.hex"
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, &hex).unwrap();
    }
    let golden = std::fs::read_to_string(path).expect("golden file (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        hex, golden,
        "the HFile bytes changed (UPDATE_GOLDEN=1 to accept)"
    );
}

#[test]
fn the_file_info_holds_what_hbase_reads() {
    let cells = vec![
        owned(b"a".to_vec(), b"q", 30, b"12345".to_vec()),
        owned(b"b".to_vec(), b"q", 10, b"1".to_vec()),
    ];
    let (bytes, _) = write(&cells, options(64 * 1024));
    let file = parse(&bytes).unwrap();
    let info = &file.info;
    assert_eq!(
        info.get(key::LASTKEY).unwrap(),
        cell(b"b", b"q", 10, b"").key()
    );
    // Keys: 12 + 1 + 1 + 1 = 15 bytes each; values 5 and 1.
    assert_eq!(info.get(key::AVG_KEY_LEN).unwrap(), 15i32.to_be_bytes());
    assert_eq!(info.get(key::AVG_VALUE_LEN).unwrap(), 3i32.to_be_bytes());
    assert_eq!(
        info.get(key::KEY_VALUE_VERSION).unwrap(),
        1i32.to_be_bytes()
    );
    assert_eq!(
        info.get(key::MAX_MEMSTORE_TS_KEY).unwrap(),
        0i64.to_be_bytes()
    );
    assert_eq!(info.get(key::TIMERANGE).unwrap(), meta::time_range(10, 30));
    assert_eq!(&info.get(key::TIMERANGE).unwrap()[..6], b"PBUF\x08\x0a");
    assert_eq!(
        info.get(key::BULKLOAD_TIMESTAMP).unwrap(),
        1_700_000_000_000i64.to_be_bytes()
    );
    assert_eq!(info.get(key::MAJOR_COMPACTION_KEY).unwrap(), [0xff]);
    assert!(
        info.get(b"hfile.MAX_TAGS_LEN").is_none(),
        "no tags: readers skip tag lengths"
    );
    // The names sort as unsigned bytes, as HBase's TreeMap keeps them.
    let names: Vec<_> = info.0.keys().cloned().collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn out_of_order_and_repeated_cells_are_refused() {
    let mut w = HFileWriter::new(Vec::new(), options(1024)).unwrap();
    w.append(&cell(b"b", b"q", 5, b"")).unwrap();
    let err = w.append(&cell(b"a", b"q", 5, b"")).unwrap_err();
    assert!(err.to_string().contains("out of order"), "{err}");
    assert!(
        err.to_string().contains("62/f:q/5"),
        "names the previous cell: {err}"
    );
    assert!(
        w.append(&cell(b"b", b"q", 5, b"other")).is_err(),
        "a repeated key is refused"
    );
    w.append(&cell(b"b", b"q", 4, b"")).unwrap();
    assert!(w.append(&cell(b"", b"q", 4, b"")).is_err());
    assert!(
        w.append(&cell(b"c", b"q", -1, b"")).is_err(),
        "before the epoch"
    );
    let long_family = [b'f'; 128];
    let c = Cell {
        family: &long_family,
        ..cell(b"c", b"q", 1, b"")
    };
    assert!(w
        .append(&c)
        .unwrap_err()
        .to_string()
        .contains("family of 128 bytes"));
}

/// Rows `r{i:08}` with one cell each and `value_len` bytes of value.
fn numbered(n: usize, row_pad: usize, value_len: usize) -> Vec<OwnedCell> {
    (0..n)
        .map(|i| {
            let mut row = format!("r{i:08}").into_bytes();
            row.resize(row.len() + row_pad, b'.');
            owned(row, b"c", 1 + i as i64, vec![(i % 251) as u8; value_len])
        })
        .collect()
}

/// Checks the index of a parsed file against its data blocks, at every level.
fn check_index(file: &super::reader::ParsedFile) {
    let data: Vec<_> = file
        .blocks
        .iter()
        .filter(|b| &b.magic == b"DATABLK*")
        .collect();
    let by_offset = |o: u64| {
        file.blocks
            .iter()
            .find(|b| b.offset == o)
            .expect("index names a block")
    };
    // Walk the tree down to the data blocks, in order.
    let mut level: Vec<(u64, u32, Vec<u8>)> = file.root.clone();
    for _ in 1..file.trailer.num_data_index_levels.unwrap() {
        let mut next = Vec::new();
        for (offset, size, key) in &level {
            let b = by_offset(*offset);
            assert_eq!(b.on_disk_size, *size);
            assert!(&b.magic == b"IDXLEAF2" || &b.magic == b"IDXINTE2");
            let n = i32::from_be_bytes(b.data[..4].try_into().unwrap()) as usize;
            let entries = 4 + 4 * (n + 1);
            let at = |i: usize| {
                entries
                    + i32::from_be_bytes(b.data[4 + 4 * i..8 + 4 * i].try_into().unwrap()) as usize
            };
            let mut children = Vec::new();
            for i in 0..n {
                let (s, e) = (at(i), at(i + 1));
                let o = u64::from_be_bytes(b.data[s..s + 8].try_into().unwrap());
                let sz = u32::from_be_bytes(b.data[s + 8..s + 12].try_into().unwrap());
                children.push((o, sz, b.data[s + 12..e].to_vec()));
            }
            assert_eq!(at(n), b.data.len());
            assert_eq!(
                &children[0].2, key,
                "a parent entry's key is its child's first key"
            );
            next.extend(children);
        }
        level = next;
    }
    assert_eq!(level.len(), data.len());
    for ((offset, size, key), block) in level.iter().zip(&data) {
        assert_eq!((*offset, *size), (block.offset, block.on_disk_size));
        let klen = i32::from_be_bytes(block.data[..4].try_into().unwrap()) as usize;
        assert_eq!(&block.data[8..8 + klen], key.as_slice());
    }
    assert_eq!(
        file.trailer.last_data_block_offset,
        Some(data.last().unwrap().offset)
    );
    assert_eq!(file.trailer.first_data_block_offset, Some(0));
    // Each block names the previous block of its type.
    for magic in [b"DATABLK*", b"IDXLEAF2", b"IDXINTE2", b"IDXROOT2"] {
        let of_type: Vec<_> = file.blocks.iter().filter(|b| &b.magic == magic).collect();
        for (i, b) in of_type.iter().enumerate() {
            let prev = if i == 0 {
                -1
            } else {
                of_type[i - 1].offset as i64
            };
            assert_eq!(b.prev_offset, prev, "{}", String::from_utf8_lossy(magic));
        }
    }
}

#[test]
fn a_large_file_gets_a_two_level_index_with_its_mid_key() {
    // One cell per data block: the leaf chunk fills after about 5,000 blocks.
    let cells = numbered(12_000, 0, 3);
    let (bytes, summary) = write(&cells, options(1));
    let file = parse(&bytes).unwrap();
    assert_eq!(file.cells, cells);
    assert_eq!(summary.index_levels, 2);
    assert_eq!(file.trailer.num_data_index_levels, Some(2));
    let leaves: Vec<_> = file
        .blocks
        .iter()
        .filter(|b| &b.magic == b"IDXLEAF2")
        .collect();
    assert!(leaves.len() >= 2, "{} leaves", leaves.len());
    assert!(leaves.iter().all(|b| b.data.len() < MAX_CHUNK_SIZE + 64));
    check_index(&file);
    // The mid key: data block (12,000 - 1) / 2 = 5,999, found in its leaf.
    let tail = &file.root_tail;
    assert_eq!(tail.len(), 16);
    let leaf_offset = u64::from_be_bytes(tail[..8].try_into().unwrap());
    let within = i32::from_be_bytes(tail[12..16].try_into().unwrap()) as usize;
    let leaf_index = file.root.iter().position(|e| e.0 == leaf_offset).unwrap();
    let before: usize = file.root[..leaf_index]
        .iter()
        .map(|(o, _, _)| {
            let b = file.blocks.iter().find(|b| b.offset == *o).unwrap();
            i32::from_be_bytes(b.data[..4].try_into().unwrap()) as usize
        })
        .sum();
    assert_eq!(before + within, 5_999);
}

#[test]
fn a_root_past_the_chunk_size_gets_intermediate_blocks() {
    // 4 KB rows: a leaf fills after ~32 blocks and the root after ~32 leaves.
    let cells = numbered(1_400, 4_000, 1);
    let (bytes, summary) = write(&cells, options(1));
    let file = parse(&bytes).unwrap();
    assert_eq!(summary.index_levels, 3);
    assert!(file.blocks.iter().any(|b| &b.magic == b"IDXINTE2"));
    assert_eq!(file.cells.len(), cells.len());
    check_index(&file);
}

#[test]
fn an_empty_meta_index_and_the_file_info_follow_the_root() {
    let cells = numbered(10, 0, 1);
    let (bytes, _) = write(&cells, options(64 * 1024));
    let file = parse(&bytes).unwrap();
    let load_on_open: Vec<_> = file
        .blocks
        .iter()
        .filter(|b| b.offset >= file.trailer.load_on_open_data_offset.unwrap())
        .map(|b| (&b.magic, b.data.len()))
        .collect();
    assert_eq!(load_on_open.len(), 3);
    assert_eq!(load_on_open[0].0, b"IDXROOT2");
    assert_eq!(load_on_open[1], (b"IDXROOT2", 0));
    assert_eq!(load_on_open[2].0, b"FILEINF2");
    let t = &file.trailer;
    assert_eq!(t.data_index_count, Some(1));
    assert_eq!(t.meta_index_count, Some(0));
    assert_eq!(t.entry_count, Some(10));
    assert_eq!(
        t.total_uncompressed_bytes,
        Some(bytes.len() as u64 - 4 * file.blocks.len() as u64)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the cells and the block size, the file holds exactly the cells given.
    #[test]
    fn any_sorted_cells_round_trip(
        raw in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 1..12),
             proptest::collection::vec(any::<u8>(), 0..6),
             0i64..5,
             proptest::collection::vec(any::<u8>(), 0..40)),
            1..300),
        block_size in 1usize..2048,
        bytes_per_checksum in prop_oneof![Just(512u32), Just(16 * 1024)],
        codec in prop_oneof![Just(Codec::None), Just(Codec::Zstd { level: 1 }), Just(Codec::Zstd { level: -3 })],
    ) {
        let mut cells: Vec<OwnedCell> = raw
            .into_iter()
            .map(|(row, q, ts, value)| OwnedCell { row, family: b"d".to_vec(), qualifier: q, timestamp: ts, value, kind: TYPE_PUT })
            .collect();
        cells.sort_by(|a, b| {
            a.row.cmp(&b.row).then(a.qualifier.cmp(&b.qualifier)).then(b.timestamp.cmp(&a.timestamp))
        });
        cells.dedup_by(|a, b| a.row == b.row && a.qualifier == b.qualifier && a.timestamp == b.timestamp);
        let (bytes, summary) = write(&cells, WriterOptions { bytes_per_checksum, codec, ..options(block_size) });
        let file = parse(&bytes).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&file.cells, &cells);
        prop_assert_eq!(file.trailer.compression_codec, Some(codec.ordinal()));
        prop_assert_eq!(summary.cells, cells.len() as u64);
        prop_assert_eq!(summary.bytes, bytes.len() as u64);
        check_index(&file);
    }
}
