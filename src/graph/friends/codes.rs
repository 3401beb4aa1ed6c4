//! User codes and packed edges: how an edge becomes 12 bytes that sort into pairs.
//!
//! Ids become order-preserving codes ([`Coder`]): offsets from the smallest id when the ids
//! span less than 2^31, else ranks in a dictionary. An edge is packed as
//! `(small << 32 | large) << 1 | dir` beside its follow time in 32 bits ([`PackedEdge`]);
//! times that do not fit are kept exactly on a side list ([`AsideTimes`]).
//!
//! Invariants: code order is id order, so sorted keys are sorted `(uid_a, uid_b)`; an id
//! without a code (outside the range the footers announced) is an error, never a wrong key.

use super::input::EdgeChunk;
use super::Slice;
use crate::error::{Error, Result};

/// No follow time known.
pub(crate) const NO_TIME: i64 = i64::MIN;
/// Largest code that fits the small side of a pair (31 bits).
pub(crate) const MAX_CODE: i64 = (1 << 31) - 1;

/// Maps user ids to order-preserving codes.
pub(crate) enum Coder {
    /// `id - base`: ids spanning less than 2^31, whatever their magnitude.
    Offset(i64),
    Dictionary(Vec<i64>),
}

impl Coder {
    pub(crate) fn encode(&self, id: i64) -> u64 {
        match self {
            Coder::Offset(base) => id.wrapping_sub(*base) as u64,
            Coder::Dictionary(ids) => ids.binary_search(&id).map_or(u64::MAX, |i| i as u64),
        }
    }

    pub(crate) fn decode(&self, code: u64) -> i64 {
        match self {
            Coder::Offset(base) => code as i64 + base,
            Coder::Dictionary(ids) => ids[code as usize],
        }
    }

    /// Codes (held as i64) to ids in place, the coder's kind matched once for the slice.
    pub(crate) fn decode_all(&self, codes: &mut [i64]) {
        match self {
            Coder::Offset(base) => codes.iter_mut().for_each(|c| *c += base),
            Coder::Dictionary(ids) => codes.iter_mut().for_each(|c| *c = ids[*c as usize]),
        }
    }
}

/// Packs an edge: `(small << 32 | large) << 1 | dir`, dir 1 when the large id follows.
/// `None` when an id has no code: outside the range the Parquet footers announced.
pub(crate) fn pack(coder: &Coder, follower: i64, followee: i64) -> Option<u64> {
    let (a, b) = (coder.encode(follower), coder.encode(followee));
    if a.max(b) > MAX_CODE as u64 {
        return None;
    }
    let (small, large, dir) = if a < b { (a, b, 0) } else { (b, a, 1) };
    Some((((small << 32) | large) << 1) | dir)
}

/// The pair of ids a pair code stands for (for bucket hashing independent of codes).
pub(crate) fn id_pair(follower: i64, followee: i64) -> u64 {
    let (s, l) = if follower < followee {
        (follower, followee)
    } else {
        (followee, follower)
    };
    (s as u64).wrapping_mul(0x1000_0000_01b3) ^ (l as u64)
}

/// A follow time in 32 bits: whole seconds since 1970 (what crawlers give), or one of two
/// markers. Times that do not fit (milliseconds, before 1970, after 2106) are exact in an
/// [`AsideTimes`] list instead; there are none in crawled data, so the list stays empty.
pub(crate) const TIME_NONE: u32 = u32::MAX;
pub(crate) const TIME_ASIDE: u32 = u32::MAX - 1;

pub(crate) fn time_code(ms: Option<i64>) -> u32 {
    ms.map_or(TIME_NONE, whole_seconds)
}

/// An edge while sorting: its packed key and time code, 12 bytes.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, packed(4))]
pub(crate) struct PackedEdge {
    pub(crate) key: u64,
    pub(crate) time: u32,
}

/// Edges sort by their key alone; the time rides along. With offset codes the key's top
/// bytes are mostly zero, and the radix sort skips a level whose bytes are all equal.
impl rdst::RadixKey for PackedEdge {
    const LEVELS: usize = 8;
    #[inline]
    fn get_level(&self, level: usize) -> u8 {
        ({ self.key } >> (level * 8)) as u8
    }
}

pub(crate) const PACKED_EDGE_BYTES: usize = std::mem::size_of::<PackedEdge>();

/// The in-memory run's edges: a zeroed anonymous mapping of their own, not the allocator's.
/// Dropping it unmaps it at once, so the output phase's buffers do not stack on top of
/// memory the allocator would still be holding. It is not asked for in huge pages: zeroing
/// them on first touch cost more system time than 4 KiB pages (docs/design/friends.md).
pub(crate) struct EdgeArray {
    pub(crate) map: memmap2::MmapMut,
    pub(crate) len: usize,
}

impl EdgeArray {
    pub(crate) fn new(len: usize) -> Result<EdgeArray> {
        let bytes = (len * PACKED_EDGE_BYTES).max(1);
        let map = memmap2::MmapMut::map_anon(bytes).map_err(|e| Error::Io {
            op: "map memory for the edges",
            path: format!("{bytes} bytes"),
            source: e,
        })?;
        Ok(EdgeArray { map, len })
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [PackedEdge] {
        // SAFETY: the mapping is page-aligned (PackedEdge needs 4), at least `len` edges
        // long, zeroed (a valid PackedEdge) and borrowed mutably with `self`.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast(), self.len) }
    }
}

/// Exact times of the edges whose time code is [`TIME_ASIDE`], earliest per key.
#[derive(Default)]
pub(crate) struct AsideTimes(pub(crate) Vec<(u64, i64)>);

impl AsideTimes {
    pub(crate) fn seal(mut self) -> AsideTimes {
        self.0.sort_unstable();
        self.0.dedup_by_key(|(key, _)| *key);
        self
    }

    pub(crate) fn earliest(&self, key: u64) -> Option<i64> {
        let i = self.0.partition_point(|(k, _)| *k < key);
        self.0.get(i).filter(|(k, _)| *k == key).map(|(_, t)| *t)
    }
}

/// How many edges of a chunk were packed, and how many self-edges it held.
#[derive(Debug)]
pub(crate) struct ChunkPacked {
    pub(crate) edges: usize,
    pub(crate) self_edges: u64,
}

/// Packs the edges of a chunk (read from `source`) that fall in `slice` into the first
/// cells of `cells`; self-edges are never friendships: they are counted and dropped. A
/// chunk with more rows than `cells` is an input whose footer undercounted its rows.
pub(crate) fn pack_into(
    coder: &Coder,
    slice: Slice,
    source: &dyn std::fmt::Display,
    c: &EdgeChunk,
    aside: &mut Vec<(u64, i64)>,
    cells: &mut [PackedEdge],
) -> Result<ChunkPacked> {
    let Some(cells) = cells.get_mut(..c.len()) else {
        return Err(Error::BadInput {
            path: source.to_string(),
            line: 0,
            reason: "more rows than the footer announced".into(),
        });
    };
    if let (Coder::Offset(base), Slice::ALL) = (coder, slice) {
        if pack_offsets(*base, c, &mut |i, edge| cells[i] = edge) {
            return Ok(ChunkPacked {
                edges: c.len(),
                self_edges: 0,
            });
        }
    }
    let mut edges = 0;
    let self_edges = pack_chunk(coder, slice, source, c, aside, &mut |edge| {
        cells[edges] = edge;
        edges += 1;
    })?;
    Ok(ChunkPacked { edges, self_edges })
}

/// The common case without a branch per edge: offset codes, every pair kept, and, as the
/// chunk turns out, no self-edge, no id beyond the codes and no time off whole seconds.
/// Each edge goes to `put(row, edge)`. Returns false when the chunk has any of those (then
/// what was put is garbage and the general path packs the chunk again). A chunk as clean
/// writes it takes this loop, without the general path's branches (docs/design/friends.md).
#[inline(always)]
pub(crate) fn pack_offsets(
    base: i64,
    c: &EdgeChunk,
    put: &mut impl FnMut(usize, PackedEdge),
) -> bool {
    let (follower, followee) = (c.follower.values(), c.followee.values());
    let times = c.times();
    match times {
        None => pack_offsets_with(base, follower, followee, put, |_| TIME_NONE),
        Some((ms, None)) => {
            pack_offsets_with(base, follower, followee, put, |i| whole_seconds(ms[i]))
        }
        Some((ms, Some(nulls))) => pack_offsets_with(base, follower, followee, put, |i| {
            if nulls.is_valid(i) {
                whole_seconds(ms[i])
            } else {
                TIME_NONE
            }
        }),
    }
}

/// A known time as whole seconds, or [`TIME_ASIDE`] when it is not a whole second in
/// 1970..2106 (see [`time_code`]).
#[inline(always)]
pub(crate) fn whole_seconds(ms: i64) -> u32 {
    let secs = ms / 1000;
    if secs * 1000 == ms && (0..TIME_ASIDE as i64).contains(&secs) {
        secs as u32
    } else {
        TIME_ASIDE
    }
}

#[inline(always)]
pub(crate) fn pack_offsets_with(
    base: i64,
    follower: &[i64],
    followee: &[i64],
    put: &mut impl FnMut(usize, PackedEdge),
    time: impl Fn(usize) -> u32,
) -> bool {
    let mut general = false;
    for (i, (&a, &b)) in follower.iter().zip(followee).enumerate() {
        let (edge, needs_general) = offset_edge(base, a, b, time(i));
        general |= needs_general;
        put(i, edge);
    }
    !general
}

/// An edge between ids coded as offsets from `base`, and whether the general path must pack
/// it instead (a self-edge, an id beyond the codes, a time aside).
#[inline(always)]
pub(crate) fn offset_edge(
    base: i64,
    follower: i64,
    followee: i64,
    time: u32,
) -> (PackedEdge, bool) {
    let (a, b) = (
        follower.wrapping_sub(base) as u64,
        followee.wrapping_sub(base) as u64,
    );
    let (small, large) = (a.min(b), a.max(b));
    let general = (large > MAX_CODE as u64) | (a == b) | (time == TIME_ASIDE);
    let key = (((small << 32) | large) << 1) | (a > b) as u64;
    (PackedEdge { key, time }, general)
}

/// Packs the edges of a chunk (read from `source`) that fall in `slice`, one by one; self-
/// edges are never friendships: they are counted and dropped. Returns the number of self-
/// edges.
pub(crate) fn pack_chunk(
    coder: &Coder,
    slice: Slice,
    source: &dyn std::fmt::Display,
    c: &EdgeChunk,
    aside: &mut Vec<(u64, i64)>,
    emit: &mut impl FnMut(PackedEdge),
) -> Result<u64> {
    let (follower, followee) = (c.follower.values(), c.followee.values());
    let mut selfs = 0;
    for i in 0..c.len() {
        let (a, b) = (follower[i], followee[i]);
        if a == b {
            selfs += 1;
            continue;
        }
        if !slice.keeps(id_pair(a, b)) {
            continue;
        }
        let key = pack(coder, a, b).ok_or_else(|| Error::BadInput {
            path: source.to_string(),
            line: 0,
            reason: format!(
                "follow {a} -> {b}: an id outside the range the Parquet statistics announce"
            ),
        })?;
        let ms = c.time(i);
        let time = time_code(ms);
        if time == TIME_ASIDE {
            aside.push((key, ms.expect("aside times are known")));
        }
        emit(PackedEdge { key, time });
    }
    Ok(selfs)
}

/// What packing one part (a row group) gave.
pub(crate) struct PartPacked {
    /// Edges kept (not self-edges, in the slice).
    pub(crate) edges: usize,
    pub(crate) self_edges: u64,
    /// `(key, ms)` of edges whose time went on the side list.
    pub(crate) aside: Vec<(u64, i64)>,
}

/// Packed edges as the bytes of their in-memory layout, the spill files' format (native
/// byte order: a spill file is read back by the process that wrote it, and only by it).
pub(crate) fn edge_bytes(edges: &[PackedEdge]) -> &[u8] {
    // SAFETY: PackedEdge is `repr(C, packed(4))` over a u64 and a u32: 12 bytes, no padding,
    // every byte initialised; u8 has no alignment to respect.
    unsafe { std::slice::from_raw_parts(edges.as_ptr().cast::<u8>(), std::mem::size_of_val(edges)) }
}

/// The bytes of packed edges, to be filled in place (see [`edge_bytes`]).
pub(crate) fn edge_bytes_mut(edges: &mut [PackedEdge]) -> &mut [u8] {
    // SAFETY: as in `edge_bytes`; and every bit pattern is a valid PackedEdge.
    unsafe {
        std::slice::from_raw_parts_mut(
            edges.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(edges),
        )
    }
}
