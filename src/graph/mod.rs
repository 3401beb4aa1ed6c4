//! Batch analytics over the social graph. First of all friendships: mutual follows.

pub mod friends;
