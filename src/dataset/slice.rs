//! One slice of a job's work, `--slice i/N`: slice `i` of `N` disjoint slices whose union
//! is the whole answer, so N machines (or N YARN tasks) can share a job.
//!
//! A slice writes its share of a partition into `<table>/dt=<date>/slice=i-of-N/`, committed
//! on its own; a reader takes a partition's slices together. The folder name is on disk, so
//! it is part of the layout (docs/formats.md).

/// Slice `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub index: u32,
    pub count: u32,
}

/// What every slice folder's name starts with.
pub const SLICE_PREFIX: &str = "slice=";

impl Slice {
    /// The whole job: one slice of one.
    pub const ALL: Slice = Slice { index: 0, count: 1 };

    /// Parses `i/N` with `0 <= i < N`.
    pub fn parse(s: &str) -> std::result::Result<Slice, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not i/N"))?;
        let index: u32 = i.trim().parse().map_err(|_| format!("{s:?}: bad i"))?;
        let count: u32 = n.trim().parse().map_err(|_| format!("{s:?}: bad N"))?;
        if count == 0 || index >= count {
            return Err(format!("{s:?}: need 0 <= i < N"));
        }
        Ok(Slice { index, count })
    }

    /// The sub-folder of a partition this slice writes: `slice=i-of-N`.
    pub fn folder(self) -> String {
        format!("{SLICE_PREFIX}{}-of-{}", self.index, self.count)
    }

    /// How a job of hash partitions is cut for this slice: `partitions(threads)` is how many
    /// partitions keep `threads` of them at once within the budget. The whole job takes that
    /// for this machine's threads. A slice must cut like every other slice whatever threads
    /// its node has, so it takes N times what one thread needs (each partition 1/N of what
    /// fits). Returns the number of partitions and this slice's, `p ≡ i (mod N)`.
    pub fn cut(self, threads: usize, partitions: impl Fn(usize) -> u32) -> (u32, Vec<u32>) {
        let n = if self == Slice::ALL {
            partitions(threads)
        } else {
            self.count * partitions(1)
        };
        let mine = (0..n).filter(|p| p % self.count == self.index).collect();
        (n, mine)
    }

    /// The slice a folder name (`slice=i-of-N`) names, if it names one.
    pub fn of_folder(name: &str) -> Option<Slice> {
        let (i, n) = name.strip_prefix(SLICE_PREFIX)?.split_once("-of-")?;
        Slice::parse(&format!("{i}/{n}")).ok()
    }
}

impl std::fmt::Display for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cut_alike_whatever_their_threads() {
        let fits = |threads: usize| 3 * threads as u32;
        assert_eq!(Slice::ALL.cut(2, fits), (6, (0..6).collect()));
        let one = Slice::parse("1/4").unwrap().cut(8, fits);
        assert_eq!(one, (12, vec![1, 5, 9]));
        assert_eq!(Slice::parse("1/4").unwrap().cut(1, fits), one);
    }

    #[test]
    fn parses_and_names_its_folder() {
        let s = Slice::parse("2/4").unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        assert_eq!(s.folder(), "slice=2-of-4");
        assert_eq!(Slice::of_folder("slice=2-of-4"), Some(s));
        assert_eq!(s.to_string(), "2/4");
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2"] {
            assert!(Slice::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Slice::of_folder("slice=4-of-4"), None);
        assert_eq!(Slice::of_folder("part-00000.parquet"), None);
    }
}
