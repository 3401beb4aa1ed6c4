//! One slice of a job's work, `--partition i/N`: slice `i` of `N` disjoint slices whose union
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
