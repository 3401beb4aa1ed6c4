//! The integration test binary: one module per job or layer (ripgrep's `tests/tests.rs`).
//!
//! Modules under `cluster` talk to the real local cluster (HDFS + HBase + Thrift from
//! `cluster/`) and are compiled only with `--features integration`; the harness starts the
//! cluster once per run, or reuses one already up, and stops only what it started.

mod harness;

mod test_cascades;
mod test_clean;
mod test_cli;
mod test_friends;
mod test_inbox;
mod test_pipeline;
mod test_rank;
mod test_run;

#[cfg(feature = "integration")]
mod test_clean_hdfs;
#[cfg(feature = "integration")]
mod test_hbase;
#[cfg(feature = "integration")]
mod test_hdfs;
#[cfg(feature = "integration")]
mod test_hfile;
#[cfg(feature = "integration")]
mod test_load;
#[cfg(feature = "integration")]
mod test_yarn;
