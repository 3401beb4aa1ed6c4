//! Writing the merged cells as HFiles: one per table, family and region, rolled past
//! [`super::MAX_HFILE_BYTES`], each closed on a thread of its own.

use crate::error::{Error, Result};
use crate::hbase::hfile::{Cell, HFileWriter, WriterOptions};
use crate::hdfs::{FileSystems, Location};

use super::record::Decoded;
use super::{table_of, StagedFile, MAX_HFILE_BYTES};
use crate::hbase::layout::Table;

/// Writes one HFile per (table, family, region), starting a new one past the size limit.
pub(super) struct FileRoller<'a> {
    fs: &'a FileSystems,
    staging: &'a Location,
    collector: usize,
    options: &'a WriterOptions,
    open: Option<OpenFile>,
    /// Files written and closing: an HDFS close waits for the NameNode to see the last
    /// block (hundreds of ms), so files close on threads of their own, all at once.
    closing: Vec<std::thread::JoinHandle<Result<StagedFile>>>,
    staged: Vec<StagedFile>,
    seq: u32,
}

struct OpenFile {
    group: Vec<u8>,
    table: Table,
    family: String,
    region: u32,
    location: Location,
    writer: HFileWriter<crate::hdfs::AtomicFile>,
}

impl<'a> FileRoller<'a> {
    pub(super) fn new(
        fs: &'a FileSystems,
        staging: &'a Location,
        collector: usize,
        options: &'a WriterOptions,
    ) -> Self {
        FileRoller {
            fs,
            staging,
            collector,
            options,
            open: None,
            closing: Vec::new(),
            staged: Vec::new(),
            seq: 0,
        }
    }

    /// Appends one cell; `key[..group]` names its file's table, family and region.
    pub(super) fn append(
        &mut self,
        group: usize,
        key: &[u8],
        r: &Decoded,
        value: &[u8],
    ) -> Result<()> {
        let same_group = self.open.as_ref().is_some_and(|f| f.group == key[..group]);
        let full = self
            .open
            .as_ref()
            .is_some_and(|f| f.writer.approx_len() >= MAX_HFILE_BYTES);
        if !same_group || full {
            self.close()?;
            let table = table_of(r.table);
            let family = String::from_utf8_lossy(&r.family).into_owned();
            let name = format!("w{}-r{}-{}", self.collector, r.region, self.seq);
            self.seq += 1;
            let location = self.staging.join(table.name()).join(&family).join(&name);
            let out = self.fs.create_atomic(&location)?;
            let options = WriterOptions {
                source_task: format!("{}/{name}", self.options.source_task),
                ..self.options.clone()
            };
            let writer = HFileWriter::new(out, options).map_err(|e| hfile_error(&location, e))?;
            self.open = Some(OpenFile {
                group: key[..group].to_vec(),
                table,
                family: family.clone(),
                region: r.region,
                location,
                writer,
            });
        }
        let f = self.open.as_mut().expect("opened above");
        let cell = Cell {
            row: &r.row,
            family: &r.family,
            qualifier: &r.qualifier,
            timestamp: r.ts,
            value,
            kind: r.kind,
        };
        f.writer
            .append(&cell)
            .map_err(|e| hfile_error(&f.location, e))
    }

    fn close(&mut self) -> Result<()> {
        let Some(f) = self.open.take() else {
            return Ok(());
        };
        let (out, summary) = f.writer.finish().map_err(|e| hfile_error(&f.location, e))?;
        let staged = StagedFile {
            table: f.table,
            family: f.family.clone(),
            region: f.region,
            location: f.location.to_string(),
            cells: summary.cells,
            bytes: summary.bytes,
        };
        if self.closing.len() >= MAX_CLOSING {
            let oldest = self.closing.remove(0);
            self.staged.push(join_closing(oldest, self.staging)?);
        }
        self.closing
            .push(std::thread::spawn(move || out.commit().map(|_| staged)));
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<Vec<StagedFile>> {
        let mut first_err = self.close().err();
        for handle in std::mem::take(&mut self.closing) {
            match join_closing(handle, self.staging) {
                Ok(f) => self.staged.push(f),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or_else(|| Ok(std::mem::take(&mut self.staged)), Err)
    }
}

impl Drop for FileRoller<'_> {
    /// On an error halfway, the files still closing finish before the run goes on to remove
    /// the staging folder, so none is renamed into place after that.
    fn drop(&mut self) {
        for handle in self.closing.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Files closing at once per collector.
const MAX_CLOSING: usize = 16;

fn join_closing(
    handle: std::thread::JoinHandle<Result<StagedFile>>,
    staging: &Location,
) -> Result<StagedFile> {
    handle.join().unwrap_or_else(|_| {
        Err(Error::Hbase {
            op: "write HFile",
            table: staging.to_string(),
            reason: "a closing thread panicked".into(),
        })
    })
}

fn hfile_error(location: &Location, e: crate::hbase::hfile::HFileError) -> Error {
    Error::Hbase {
        op: "write HFile",
        table: location.to_string(),
        reason: e.to_string(),
    }
}
