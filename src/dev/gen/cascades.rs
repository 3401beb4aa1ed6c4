//! Repost chains in the form the Weibo API gives them, and their truth.
//!
//! The generator first picks, for each repost, an earlier post it reposts. Weibo then names
//! the root of that post as what was reposted (`retweeted_status`, so `retweet_mid`), and
//! writes the hops in the text: the reposter's words, `//@<parent's author>:`, then the
//! parent's whole text. [`hang`] turns the picks into that form and keeps the real tree.
//!
//! Invariants: a repost's parent is its author's latest repost of the same root made before
//! it (posts are made in index order, which is the order of `(created_at, mid)`), so the
//! rule `cascades` applies to the text finds exactly the parent kept here; depth is 1 under
//! the root.

use std::collections::HashMap;
use std::fmt::Write as _;

use md5::{Digest, Md5};
use serde::Serialize;

use super::{mid, uid, PostRow};

/// The most characters of hops a repost's text carries; the farthest hops go first (the
/// nearest, which decides the parent, always stays).
const MAX_CHAIN_CHARS: usize = 1_000;

/// The real tree of every repost.
pub(super) struct Chains {
    /// Per post: the repost it hangs under, `None` for an original or a repost of the root.
    pub parent: Vec<Option<u32>>,
    /// Per post: 1 under the root, 0 for an original.
    pub depth: Vec<u32>,
}

/// What `cascades` must build: counts, and an MD5 over one line per cascade, `c <root mid>
/// <size> <depth>` by root mid, then one per repost, `r <mid> <path uids, comma-separated>`
/// by mid (the path from the repost's author back to the root's).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CascadesTruth {
    pub cascades: u64,
    pub reposts: u64,
    pub max_depth: u32,
    pub md5: String,
}

/// Rewrites each repost's `retweet` from the post it picked to that post's root, and returns
/// the tree. A pick that is a repost by user `u` of root `R` hangs the new repost under
/// `u`'s latest repost of `R` so far.
pub(super) fn hang(posts: &mut [PostRow]) -> Chains {
    let n = posts.len();
    let mut parent = vec![None; n];
    let mut depth = vec![0u32; n];
    let mut latest: HashMap<(u64, u64), u32> = HashMap::new();
    for i in 0..n {
        let Some(picked) = posts[i].retweet else {
            continue;
        };
        let picked = picked as usize;
        let (root, under) = match posts[picked].retweet {
            // `picked` was rewritten already: its retweet is its root.
            Some(root) if depth[picked] > 0 => {
                let by = posts[picked].author;
                (root, Some(latest[&(by, root)]))
            }
            _ => (picked as u64, None),
        };
        posts[i].retweet = Some(root);
        parent[i] = under;
        depth[i] = under.map_or(1, |p| depth[p as usize] + 1);
        latest.insert((posts[i].author, root), i as u32);
    }
    Chains { parent, depth }
}

impl Chains {
    /// The text of post `i`: its own `words`, then for each hop up the chain, nearest first,
    /// `//@<author's screen name>:` and that hop's words.
    pub(super) fn text(
        &self,
        posts: &[PostRow],
        i: usize,
        words: &dyn Fn(usize) -> String,
    ) -> String {
        let mut text = words(i);
        let mut at = self.parent[i];
        let mut chars = 0;
        while let Some(p) = at {
            let p = p as usize;
            let hop = format!("//@用户{:07}:{}", posts[p].author, words(p));
            chars += hop.chars().count();
            if chars > MAX_CHAIN_CHARS {
                break;
            }
            text.push_str(&hop);
            at = self.parent[p];
        }
        text
    }

    /// The truth of every cascade.
    pub(super) fn truth(&self, posts: &[PostRow]) -> CascadesTruth {
        // Root index -> (size, depth).
        let mut roots: std::collections::BTreeMap<u64, (u64, u32)> = Default::default();
        let mut lines = String::new();
        let mut reposts = 0;
        for (i, p) in posts.iter().enumerate() {
            let Some(root) = p.retweet else { continue };
            reposts += 1;
            let e = roots.entry(root).or_default();
            e.0 += 1;
            e.1 = e.1.max(self.depth[i]);
        }
        for (root, (size, depth)) in &roots {
            let _ = writeln!(lines, "c {} {size} {depth}", mid(*root));
        }
        for (i, p) in posts.iter().enumerate() {
            let Some(root) = p.retweet else { continue };
            let mut path = vec![uid(p.author)];
            let mut at = self.parent[i];
            while let Some(a) = at {
                path.push(uid(posts[a as usize].author));
                at = self.parent[a as usize];
            }
            path.push(uid(posts[root as usize].author));
            let path: Vec<String> = path.iter().map(i64::to_string).collect();
            let _ = writeln!(lines, "r {} {}", mid(i as u64), path.join(","));
        }
        CascadesTruth {
            cascades: roots.len() as u64,
            reposts,
            max_depth: roots.values().map(|r| r.1).max().unwrap_or(0),
            md5: Md5::digest(lines.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(author: u64, retweet: Option<u64>) -> PostRow {
        PostRow {
            author,
            created: 0,
            retweet,
            mentions: Vec::new(),
        }
    }

    #[test]
    fn picks_become_roots_and_hops() {
        // 0: A's original. 1: B reposts 0. 2: C reposts 1. 3: B reposts 0 again.
        // 4: D picks 1, B's first repost: it hangs under B's latest, 3.
        let mut posts = vec![
            post(10, None),
            post(11, Some(0)),
            post(12, Some(1)),
            post(11, Some(0)),
            post(13, Some(1)),
        ];
        let chains = hang(&mut posts);
        let roots: Vec<Option<u64>> = posts.iter().map(|p| p.retweet).collect();
        assert_eq!(roots, vec![None, Some(0), Some(0), Some(0), Some(0)]);
        assert_eq!(chains.parent, vec![None, None, Some(1), None, Some(3)]);
        assert_eq!(chains.depth, vec![0, 1, 2, 1, 2]);
        let words = |i: usize| format!("w{i}");
        assert_eq!(chains.text(&posts, 2, &words), "w2//@用户0000011:w1");
        assert_eq!(chains.text(&posts, 1, &words), "w1");
        let t = chains.truth(&posts);
        assert_eq!((t.cascades, t.reposts, t.max_depth), (1, 4, 2));
    }
}
