//! Parquet files by URL, the one way every job reads and writes them: [`read`] (positioned
//! reads of footers and projected column chunks) and [`write`] (the toolkit's properties,
//! atomic and staged files). Where the files go, and when they become visible, is the
//! partitions' commit protocol ([`super::partition`]).

pub mod read;
pub mod sorted;
pub mod write;

pub use read::*;
pub use write::*;
