//! One cascade rebuilt as a tree: each repost of a root hung under its nearest hop.
//!
//! A repost's parent is, in this order: the direct parent a crawler gave, when it is a repost
//! of the same root made earlier; else the latest repost of the same root that the user named
//! by the first `//@` marker made before this one; else the root. "Before" is the order of
//! (created_at, mid), so two reposts in the same second still have one order, the same on
//! every run.
//!
//! Invariants: reposts are placed in that order, so a parent is always placed before its
//! children and a depth is its parent's plus one; a path runs from the repost back to the
//! root's author (left out when the root was not crawled).

use rustc_hash::FxHashMap;
use serde::Serialize;

/// A repost as the builder needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Repost {
    pub mid: i64,
    pub uid: i64,
    pub created: i64,
    /// The uid of the user the first marker names, when the name is a known user's.
    pub named: Option<i64>,
    /// Whether the text had a marker at all (named or not).
    pub marked: bool,
    /// The reposted repost, when the crawler recorded it.
    pub direct: Option<i64>,
}

/// Where a repost's parent came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The crawler's own parent id.
    Direct,
    /// The first `//@` marker's user, who reposted the root earlier.
    Marker,
    /// No marker: a repost of the root itself.
    NoMarker,
    /// A marker whose user is unknown or made no earlier repost of the root (the named
    /// parent was not crawled): hung under the root.
    MarkerNotFound,
}

/// A repost placed in its cascade.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    pub mid: i64,
    pub uid: i64,
    /// The parent repost's mid, or the root's.
    pub parent_mid: i64,
    /// 1 for a repost of the root.
    pub depth: u32,
    /// The uids from this repost back to the root's author.
    pub path: Vec<i64>,
    pub source: Source,
}

/// A cascade's summary row.
#[derive(Clone, Debug, PartialEq)]
pub struct Cascade {
    pub root_mid: i64,
    pub root_uid: Option<i64>,
    /// Reposts in the cascade (the root not counted).
    pub size: u64,
    /// The deepest repost's depth.
    pub depth: u32,
    /// The first and the last repost's time.
    pub first_at: i64,
    pub last_at: i64,
}

/// Builds the cascade of root `root_mid` (by `root_uid`, `None` when the root was not
/// crawled) from its reposts, in any order; none may be empty.
pub fn build(
    root_mid: i64,
    root_uid: Option<i64>,
    mut reposts: Vec<Repost>,
) -> (Cascade, Vec<Placed>) {
    reposts.sort_unstable_by_key(|r| (r.created, r.mid));
    let root_path: Vec<i64> = root_uid.into_iter().collect();
    let mut placed: Vec<Placed> = Vec::with_capacity(reposts.len());
    let mut by_mid: FxHashMap<i64, usize> = FxHashMap::default();
    let mut latest_of: FxHashMap<i64, usize> = FxHashMap::default();
    for r in &reposts {
        let direct = r.direct.and_then(|d| by_mid.get(&d).copied());
        let (parent, source) = match (direct, r.named) {
            (Some(p), _) => (Some(p), Source::Direct),
            (None, Some(v)) => match latest_of.get(&v) {
                Some(&p) => (Some(p), Source::Marker),
                None => (None, Source::MarkerNotFound),
            },
            (None, None) if r.marked => (None, Source::MarkerNotFound),
            (None, None) => (None, Source::NoMarker),
        };
        let (parent_mid, depth, parent_path) = match parent {
            Some(p) => (placed[p].mid, placed[p].depth + 1, &placed[p].path),
            None => (root_mid, 1, &root_path),
        };
        let mut path = Vec::with_capacity(parent_path.len() + 1);
        path.push(r.uid);
        path.extend_from_slice(parent_path);
        let i = placed.len();
        placed.push(Placed {
            mid: r.mid,
            uid: r.uid,
            parent_mid,
            depth,
            path,
            source,
        });
        by_mid.insert(r.mid, i);
        latest_of.insert(r.uid, i);
    }
    let cascade = Cascade {
        root_mid,
        root_uid,
        size: placed.len() as u64,
        depth: placed.iter().map(|p| p.depth).max().unwrap_or(0),
        first_at: reposts.first().map_or(0, |r| r.created),
        last_at: reposts.last().map_or(0, |r| r.created),
    };
    (cascade, placed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repost(mid: i64, uid: i64, created: i64, named: Option<i64>) -> Repost {
        Repost {
            mid,
            uid,
            created,
            named,
            marked: named.is_some(),
            direct: None,
        }
    }

    /// Alice posts the root (mid 1); Bob reposts it; Carol reposts Bob's (//@Bob); Dave
    /// reposts Carol's (//@Carol//@Bob): three deep. Eve names Frank, who never reposted.
    #[test]
    fn a_chain_three_deep_and_a_parent_never_crawled() {
        let (alice, bob, carol, dave, eve, frank) = (10, 20, 30, 40, 50, 60);
        let reposts = vec![
            repost(5, dave, 400, Some(carol)),
            repost(2, bob, 100, None),
            repost(3, carol, 200, Some(bob)),
            repost(6, eve, 500, Some(frank)),
        ];
        let (c, placed) = build(1, Some(alice), reposts);
        assert_eq!((c.size, c.depth, c.first_at, c.last_at), (4, 3, 100, 500));
        let by: Vec<(i64, i64, u32, Vec<i64>, Source)> = placed
            .into_iter()
            .map(|p| (p.mid, p.parent_mid, p.depth, p.path, p.source))
            .collect();
        assert_eq!(
            by,
            vec![
                (2, 1, 1, vec![bob, alice], Source::NoMarker),
                (3, 2, 2, vec![carol, bob, alice], Source::Marker),
                (5, 3, 3, vec![dave, carol, bob, alice], Source::Marker),
                (6, 1, 1, vec![eve, alice], Source::MarkerNotFound),
            ]
        );
    }

    #[test]
    fn the_named_users_latest_earlier_repost_is_the_parent() {
        // Bob reposts twice; Carol, between them, hangs under the first; a direct id wins.
        let mut direct = repost(9, 40, 400, Some(20));
        direct.direct = Some(2);
        let (c, placed) = build(
            1,
            None,
            vec![
                repost(2, 20, 100, None),
                repost(3, 30, 150, Some(20)),
                repost(4, 20, 200, None),
                repost(5, 30, 250, Some(20)),
                direct,
            ],
        );
        let parents: Vec<(i64, i64)> = placed.iter().map(|p| (p.mid, p.parent_mid)).collect();
        assert_eq!(parents, vec![(2, 1), (3, 2), (4, 1), (5, 4), (9, 2)]);
        assert_eq!(placed[4].source, Source::Direct);
        // The root was not crawled: paths stop at the first repost.
        assert_eq!(placed[1].path, vec![30, 20]);
        assert_eq!(c.root_uid, None);
    }

    /// The definition, one repost at a time against all the others.
    fn naive(root: i64, reposts: &[Repost]) -> Vec<(i64, i64, u32)> {
        let before = |a: &Repost, b: &Repost| (a.created, a.mid) < (b.created, b.mid);
        let parent_of = |r: &Repost| -> Option<&Repost> {
            let v = r.named?;
            reposts
                .iter()
                .filter(|o| o.uid == v && before(o, r))
                .max_by_key(|o| (o.created, o.mid))
        };
        let depth = |r: &Repost| {
            let (mut d, mut at) = (1, r);
            while let Some(p) = parent_of(at) {
                d += 1;
                at = p;
            }
            d
        };
        let mut out: Vec<(i64, i64, u32)> = reposts
            .iter()
            .map(|r| (r.mid, parent_of(r).map_or(root, |p| p.mid), depth(r)))
            .collect();
        out.sort_unstable();
        out
    }

    proptest! {
        #[test]
        fn equals_the_definition(
            raw in proptest::collection::vec((0i64..8, 0i64..50, proptest::option::of(0i64..8)), 1..60),
        ) {
            let reposts: Vec<Repost> = raw
                .iter()
                .enumerate()
                .map(|(i, &(uid, created, named))| repost(100 + i as i64, uid, created, named))
                .collect();
            let (c, placed) = build(1, Some(99), reposts.clone());
            let mut got: Vec<(i64, i64, u32)> =
                placed.iter().map(|p| (p.mid, p.parent_mid, p.depth)).collect();
            got.sort_unstable();
            let want = naive(1, &reposts);
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(c.depth, want.iter().map(|w| w.2).max().unwrap());
            for p in &placed {
                prop_assert_eq!(p.path.len() as u32, p.depth + 1);
                prop_assert_eq!(*p.path.last().unwrap(), 99);
            }
        }
    }
}
