//! The nightly runner that `weibo-etl run` drives: a job file ([`job`]) names the stages
//! (clean → load → friends → rank → inbox → cascades) and where their data lives; each date's run takes the job's
//! [`lock`], runs the stages that are not committed yet as child processes of this binary,
//! and records what each did under `<root>/_runs/<namespace>/dt=<date>/`.
//!
//! Invariants: a stage counts as committed for a date only when its report says it
//! finished and its output is committed (`_SUCCESS`), so a killed or failed stage is run
//! again; once a stage runs, every later stage of that date runs too (its input changed);
//! the stages themselves keep reruns idempotent (atomic partitions, the loader's counter
//! snapshot), so running a committed date again changes nothing a reader sees.
//! `docs/nightly.md` has the whole protocol.

mod child;
pub mod job;
pub mod lock;
pub mod run;
pub mod summary;

use crate::error::Result;
use crate::hdfs::{FileSystems, Location};
use crate::stage::Stage;

/// Whether a stage's output for `date` is committed: `_SUCCESS` in its partition (for
/// `clean`, in any entity's). `load` has no partition: its report decides alone.
pub fn output_committed(
    fs: &FileSystems,
    stage: Stage,
    place: &Location,
    date: &str,
) -> Result<bool> {
    let dt = format!("dt={date}");
    match stage {
        Stage::Clean => {
            for entity in ["users", "posts", "follows", "comments", "reposts"] {
                if fs.exists(&place.join(entity).join(&dt).join("_SUCCESS"))? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Stage::Friends | Stage::Rank | Stage::Inbox | Stage::Cascades => {
            fs.exists(&place.join(stage.name()).join(&dt).join("_SUCCESS"))
        }
        Stage::Load => Ok(true),
    }
}
