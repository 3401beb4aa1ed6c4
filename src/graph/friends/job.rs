//! The `friends` job as a whole: the friendships of the input written as committed
//! partitions under the output, and with `hbase` into HBase too ([`super::hbase`]).
//!
//! Invariant: rows stream into staged files as partitions finish; nothing is visible until
//! the commit, and a failure leaves nothing behind. The HBase marker is written only once
//! the output it describes is committed.

use crate::dataset::partition;
use crate::error::{Result, ResultExt};
use crate::hbase::write::WriteOptions;
use crate::hdfs::{FileSystems, Location};

use super::hbase::Loaded;
use super::{FriendsOptions, FriendsStats, FriendsWriter};

/// What a friends job did: its figures, the committed partition, and what it wrote into
/// HBase (with `hbase`).
pub struct Done {
    pub stats: FriendsStats,
    pub committed: Location,
    pub loaded: Option<Loaded>,
}

/// Computes the friendships of `inputs` into `<output>/friends/dt=<date>/` and
/// `<output>/friend_counts/dt=<date>/` (of `options.slice`), and into HBase when `hbase`
/// says where. An input that is a table root reads its committed nights up to `date` only
/// ([`partition::nights_upto`]), so a rerun of an old date sees that date's history.
pub fn run(
    fs: &FileSystems,
    inputs: &[String],
    output: &Location,
    date: &str,
    options: &FriendsOptions,
    data_page_version: u8,
    hbase: Option<&WriteOptions>,
) -> Result<Done> {
    let inputs = &partition::nights_upto(fs, inputs, date)?;
    let writer = FriendsWriter::create(fs, output, date, options.slice, data_page_version)?;
    let (stats, loaded, marker) = match hbase {
        Some(hbase) => {
            let (stats, loaded, marker) =
                super::hbase::run(fs, inputs, options, output, &writer, hbase)
                    .context("computing friends into HBase")?;
            (stats, Some(loaded), marker)
        }
        None => {
            let stats = super::run_to(fs, inputs, options, &writer).context("computing friends")?;
            (stats, None, None)
        }
    };
    let committed = writer.commit().context("writing friends")?;
    if let Some(marker) = marker {
        marker.write(fs).context("recording the friends loaded")?;
    }
    log::debug!("friends: committed");
    Ok(Done {
        stats,
        committed,
        loaded,
    })
}
