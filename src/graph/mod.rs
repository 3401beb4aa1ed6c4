//! Batch analytics over the social graph, one folder per job: friendships (mutual follows),
//! the daily leaderboards, the repost cascades and the home feeds (inbox). Each job reads the cleaned tables through the
//! [`crate::dataset`] contract and writes committed partitions of its own.

pub mod cascades;
pub mod friends;
pub mod inbox;
pub mod loaded;
pub mod rank;
pub mod round;
