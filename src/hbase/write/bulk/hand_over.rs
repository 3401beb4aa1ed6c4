//! Handing staged HFiles to HBase, table by table, and checking that it took every one.

use std::collections::BTreeMap;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

use super::StagedFile;
use crate::hbase::layout::Table;

/// HBase's default `hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily`.
pub const MAX_FILES_PER_REGION: usize = 32;

/// What the hand-over did.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HandOver {
    pub tables: usize,
    pub files: usize,
    pub cells: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// Hands each table's staged files to HBase with `command <dir> <namespace:table>`, and checks
/// that HBase took every one: the command must succeed, print no checksum failure, and leave
/// none of the files behind (a region server moves the files it adopts).
pub fn hand_over(
    fs: &FileSystems,
    staging: &Location,
    namespace: &str,
    command: &[String],
    staged: &[StagedFile],
) -> Result<HandOver> {
    let started = std::time::Instant::now();
    let mut by_table: BTreeMap<Table, Vec<&StagedFile>> = BTreeMap::new();
    for f in staged {
        by_table.entry(f.table).or_default().push(f);
    }
    if command.is_empty() {
        return Err(Error::Usage("--bulkload-cmd is empty".into()));
    }
    // HBase refuses more than 32 files per region and family
    // (`hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily`): say so before handing over.
    let mut per_group: BTreeMap<(Table, &str, u32), usize> = BTreeMap::new();
    for f in staged {
        *per_group.entry((f.table, &f.family, f.region)).or_default() += 1;
    }
    if let Some(((table, family, region), n)) =
        per_group.iter().find(|(_, n)| **n > MAX_FILES_PER_REGION)
    {
        return Err(Error::Hbase {
            op: "bulk load",
            table: table.in_namespace(namespace),
            reason: format!(
                "{n} files for region {region}, family {family}: HBase takes at most \
                 {MAX_FILES_PER_REGION} (hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily); \
                 split the table into more regions"
            ),
        });
    }
    // Tables go over at once: each hand-over waits mostly on its command's start and on the
    // region servers, not on this machine.
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = by_table
            .iter()
            .map(|(table, files)| {
                scope.spawn(move || hand_over_table(fs, staging, namespace, command, *table, files))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Hbase {
                        op: "bulk load",
                        table: namespace.to_string(),
                        reason: "a hand-over thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    let mut done = HandOver {
        tables: by_table.len(),
        ..HandOver::default()
    };
    for files in by_table.values() {
        done.files += files.len();
        done.cells += files.iter().map(|f| f.cells).sum::<u64>();
        done.bytes += files.iter().map(|f| f.bytes).sum::<u64>();
    }
    done.seconds = started.elapsed().as_secs_f64();
    Ok(done)
}

/// Hands one table's folder over and checks that HBase took every file.
fn hand_over_table(
    fs: &FileSystems,
    staging: &Location,
    namespace: &str,
    command: &[String],
    table: Table,
    files: &[&StagedFile],
) -> Result<()> {
    let dir = staging.join(table.name());
    let full = table.in_namespace(namespace);
    log::info!("bulk load: {} files into {full}", files.len());
    let (program, fixed) = command.split_first().expect("checked non-empty");
    let out = Command::new(program)
        .args(fixed)
        .arg(dir.to_string())
        .arg(&full)
        .output()
        .map_err(|e| Error::Hbase {
            op: "bulk load",
            table: full.clone(),
            reason: format!("cannot run {program}: {e}"),
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(15)..].join("\n");
    if !out.status.success() {
        return Err(Error::Hbase {
            op: "bulk load",
            table: full,
            reason: format!("{} exited with {}:\n{tail}", command.join(" "), out.status),
        });
    }
    if text.contains("checksum verification failed") {
        return Err(Error::Hbase {
            op: "bulk load",
            table: full,
            reason: format!("HBase reported a checksum failure:\n{tail}"),
        });
    }
    let mut left = Vec::new();
    for f in files {
        if fs.exists(&fs.parse(&f.location)?)? {
            left.push(f.location.clone());
        }
    }
    if let Some(first) = left.first() {
        return Err(Error::Hbase {
            op: "bulk load",
            table: full,
            reason: format!(
                "HBase did not adopt {} of {} files (first: {first}); a region may have split \
                 during the load: run it again",
                left.len(),
                files.len(),
            ),
        });
    }
    fs.delete(&dir)
}
