//! `--shuffle-only`: stage 1 for inputs that are already webdataset tars.
//!
//! Consecutive members sharing a key (webdataset's rule: the path up to the first dot of the
//! file name) form one sample, and samples are re-shuffled as units with every member's bytes
//! and extension kept; their keys are renamed `{shard}_{index}` in the output, like contexts.
//! A sample's cell payload is `count: u32`, then per member `ext_len: u16 | ext | len: u32 | data`.

use std::path::Path;

use super::cells::{push_record, RunBuffer};
use super::config::ShuffleConfig;
use super::contexts::context_id;
use super::rng::cell_of;
use super::state::{crash_point, run_path, save, Position, State};
use super::tar::TarReader;
use crate::cancel::Cancel;
use crate::error::{Error, IoContext, Result};
use crate::progress::{Progress, ProgressSnapshot};
use crate::read::decompress;

/// Split a member name into (key, extension) the way webdataset does.
pub fn split_key(name: &str) -> (&str, &str) {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    match name[base_start..].find('.') {
        Some(dot) => (&name[..base_start + dot], &name[base_start + dot + 1..]),
        None => (name, ""),
    }
}

/// Encode a sample's members as one cell payload.
pub fn encode_sample(members: &[(String, Vec<u8>)], out: &mut Vec<u8>) {
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for (ext, data) in members {
        out.extend_from_slice(&(ext.len() as u16).to_le_bytes());
        out.extend_from_slice(ext.as_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
}

/// The (extension, data) members of a sample payload.
pub fn decode_sample<'a>(payload: &'a [u8], path: &Path) -> Result<Vec<(&'a str, &'a [u8])>> {
    let bad = || Error::format(path, "a sample record is malformed");
    let take = |pos: &mut usize, n: usize| -> Result<&'a [u8]> {
        let s = payload.get(*pos..*pos + n).ok_or_else(bad)?;
        *pos += n;
        Ok(s)
    };
    let mut pos = 0usize;
    let count = u32::from_le_bytes(take(&mut pos, 4)?.try_into().expect("4 bytes"));
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let ext_len = u16::from_le_bytes(take(&mut pos, 2)?.try_into().expect("2 bytes"));
        let ext = std::str::from_utf8(take(&mut pos, ext_len as usize)?).map_err(|_| bad())?;
        let len = u32::from_le_bytes(take(&mut pos, 4)?.try_into().expect("4 bytes"));
        out.push((ext, take(&mut pos, len as usize)?));
    }
    Ok(out)
}

/// A sample's members as (extension, bytes).
type Members = Vec<(String, Vec<u8>)>;

struct Scatter<'a> {
    cfg: &'a ShuffleConfig,
    state: &'a mut State,
    buffer: RunBuffer,
    /// Blocks of written runs, for the next samples.
    spares: Vec<Vec<u8>>,
}

impl Scatter<'_> {
    fn push(&mut self, file: usize, index: u64, members: &[(String, Vec<u8>)]) {
        let id = context_id(file, index);
        let mut block = self.spares.pop().unwrap_or_default();
        push_record(&mut block, id, |out| encode_sample(members, out));
        let cell = cell_of(self.cfg.seed, id, self.cfg.num_local_cells);
        self.state.counts.cell_bytes += self.buffer.push_records(block, &[cell]) as u64;
        self.state.counts.documents += 1;
    }

    fn checkpoint(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            let n = self.buffer.len() as u64;
            let path = run_path(&self.cfg.local_cell_dir, self.state.runs);
            self.buffer.write(&path, self.cfg.num_local_cells, |b| self.spares.push(b))?;
            crash_point("run-written");
            self.state.runs += 1;
            self.state.counts.contexts += n;
        }
        save(&self.cfg.local_cell_dir, self.state)?;
        crash_point("checkpoint-saved");
        Ok(())
    }
}

/// Stage 1 of `--shuffle-only`, from `state.position` to the end of `cfg`'s inputs (or of its
/// slice of them, in a cells task; a sample keeps the index of its file in the whole listing).
pub(super) fn run(cfg: &ShuffleConfig, state: &mut State, cancel: &Cancel) -> Result<()> {
    let start = state.position.clone();
    let files = start.file..cfg.file_range().end;
    let remaining = cfg.inputs[files.clone()].iter().filter_map(|p| crate::storage::size(p).ok()).sum();
    let mut progress = Progress::new(cfg.progress, "shuffle-cells", remaining);
    let mut snap = ProgressSnapshot::default();
    let mut s = Scatter { cfg, state, buffer: RunBuffer::default(), spares: Vec::new() };
    for file in files {
        let path = &cfg.inputs[file];
        let skip = if file == start.file { start.lines } else { 0 };
        // Buffered: the tar is read a 512-byte header at a time.
        let tar = decompress(path, std::fs::File::open(path).with_path(path)?)?;
        let mut reader = TarReader::new(std::io::BufReader::with_capacity(1 << 20, tar));
        let mut index = 0u64;
        let mut current: Option<(String, Members)> = None;
        loop {
            cancel.check()?;
            let member = reader.next_member().map_err(|e| Error::format(path, format!("cannot read the tar: {e}")))?;
            let key_of_next = member.as_ref().map(|(name, _)| split_key(name).0.to_string());
            if current.as_ref().is_some_and(|(key, _)| Some(key) != key_of_next.as_ref()) {
                let (_, members) = current.take().expect("a sample");
                if index >= skip {
                    s.push(file, index, &members);
                }
                index += 1;
                s.state.position.lines = index.max(skip);
                snap.documents += 1;
                progress.update(snap);
                if s.buffer.bytes() >= cfg.buffer_bytes {
                    s.checkpoint()?;
                }
            }
            let Some((name, data)) = member else { break };
            let (key, ext) = split_key(&name);
            current.get_or_insert_with(|| (key.to_string(), Vec::new())).1.push((ext.to_string(), data));
        }
        s.state.position = Position { file: file + 1, ..Position::default() };
        let (c, bytes) = (&mut s.state.counts, crate::storage::size(path).unwrap_or(0));
        c.files_done += 1;
        c.input_bytes += bytes;
        c.lines += index;
        snap.bytes += bytes;
        progress.update(snap);
    }
    s.checkpoint()?;
    progress.finish(snap);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_key("a/b.c/x_1.json.gz"), ("a/b.c/x_1", "json.gz"));
        assert_eq!(split_key("x.npy"), ("x", "npy"));
        assert_eq!(split_key("noext"), ("noext", ""));
    }

    #[test]
    fn sample_payload_round_trip() {
        let members = vec![("json.gz".to_string(), vec![1u8, 2, 3]), ("txt".to_string(), vec![])];
        let mut out = Vec::new();
        encode_sample(&members, &mut out);
        let got = decode_sample(&out, Path::new("x")).unwrap();
        assert_eq!(got, vec![("json.gz", &[1u8, 2, 3][..]), ("txt", &[][..])]);
        assert!(decode_sample(&out[..out.len() - 1], Path::new("x")).is_err());
    }
}
