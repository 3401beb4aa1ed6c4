//! Batch analytics over the social graph, one folder per job: friendships (mutual follows),
//! the daily leaderboards and the repost cascades. Each job reads the cleaned tables through the
//! [`crate::dataset`] contract and writes committed partitions of its own.

pub mod cascades;
pub mod friends;
pub mod rank;
