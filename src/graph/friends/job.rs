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

use super::carried::{self, Plan};
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
/// ([`partition::nights_upto`]), so a rerun of an old date sees that date's history. A
/// follows root continues from an earlier night's friendships when it can ([`carried`]).
pub fn run(
    fs: &FileSystems,
    inputs: &[String],
    output: &Location,
    date: &str,
    options: &FriendsOptions,
    data_page_version: u8,
    hbase: Option<&WriteOptions>,
) -> Result<Done> {
    let nights = &partition::nights_upto(fs, inputs, date)?;
    let plan = Plan::of(fs, inputs, output, date, options)?;
    let writer = FriendsWriter::create(fs, output, date, options.slice, data_page_version)?;
    let stats = match plan.as_ref().and_then(|p| p.base.as_ref().map(|b| (p, b))) {
        Some((plan, base)) => carried::run(fs, plan, base, &writer)
            .with_context(|| format!("continuing the friends of {}", base.date))?,
        None => super::run_to(fs, nights, options, &writer).context("computing friends")?,
    };
    if let Some(plan) = &plan {
        writer.record(&plan.record(&stats))?;
    }
    let (loaded, marker) = match hbase {
        Some(hbase) => {
            let (loaded, marker) =
                super::hbase::load(fs, nights, options.slice, output, &writer, hbase)
                    .context("writing friends into HBase")?;
            (Some(loaded), marker)
        }
        None => (None, None),
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
