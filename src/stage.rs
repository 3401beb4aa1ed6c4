//! The jobs of a night, as one type: what `run` runs, what `yarn submit` slices, and what a
//! report is of. Adding a job is one case here plus its folder (and its subcommand).
//!
//! Invariant: [`Stage::ALL`] is the only order in which a night may run them (each reads what
//! the ones before it committed), and a stage's name is its subcommand's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One job of the nightly chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Clean,
    Load,
    Friends,
    Rank,
    Inbox,
    Cascades,
}

impl Stage {
    /// Every stage, in run order.
    pub const ALL: [Stage; 6] = [
        Stage::Clean,
        Stage::Load,
        Stage::Friends,
        Stage::Rank,
        Stage::Inbox,
        Stage::Cascades,
    ];

    /// Its name: the subcommand that runs it, and its key in job files and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Clean => "clean",
            Stage::Load => "load",
            Stage::Friends => "friends",
            Stage::Rank => "rank",
            Stage::Inbox => "inbox",
            Stage::Cascades => "cascades",
        }
    }

    /// The stage named `name`, if any.
    pub fn of(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Every stage's name, in run order, for messages.
    pub fn names() -> String {
        Stage::ALL.map(Stage::name).join(", ")
    }

    /// Whether its output is the graph jobs' (under the job's `graph` place), not the
    /// cleaned tables (`clean`) or HBase cells alone (`load`).
    pub fn is_graph(self) -> bool {
        matches!(
            self,
            Stage::Friends | Stage::Rank | Stage::Inbox | Stage::Cascades
        )
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stage {
    type Err = Error;

    fn from_str(name: &str) -> Result<Stage> {
        Stage::of(name).ok_or_else(|| {
            Error::Usage(format!(
                "unknown stage `{name}` (stages: {})",
                Stage::names()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_run_order() {
        for (i, s) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(Stage::of(s.name()), Some(s));
            assert_eq!(s.to_string().parse::<Stage>().unwrap(), s);
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
            assert!(Stage::ALL[..i].iter().all(|before| *before < s));
        }
        assert!("shuffle".parse::<Stage>().is_err());
        assert_eq!(
            Stage::names(),
            "clean, load, friends, rank, inbox, cascades"
        );
    }
}
